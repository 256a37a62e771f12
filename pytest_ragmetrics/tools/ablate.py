"""Ablations and sweeps: one loop over settings gives one table, and the queries that moved.

Seed 000's point, made reusable: when mode and parameters are arguments of one
``search_batch`` call, comparing ``bm25`` / ``vector`` / ``hybrid`` /
``hybrid+rerank``, or sweeping ``top_k``, ``fetch_k``, ``rrf_k`` or ``chunk_size``,
is a loop, and its output is a Markdown table whose every row was measured the
same way (same golden set, same :class:`MeasurementConfig`, same id mapping and
dedup). Under the table go the number of questions and what one question is
worth (1/n), and a per-query breakdown: the questions whose value differs
between rows, because a mean that moved says nothing about which questions did.

Everything here works on plain objects: a retriever with the reference stack's
``search_batch(queries, top_k, fetch_k, mode, threshold, rerank=, rrf_k=,
unique_docs=)``, or a factory that builds one per chunking (chunking changes the
index, so each chunking needs a retriever, and an index directory, of its own).
:func:`stack_factory` builds such a factory over the reference stack; it is the
only function here that imports the stack.

Sweeps vary one parameter at a time around the base setting (seed 001's
single-variable rule); they are not a grid.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.evaluation import mean_metrics, score_query
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.measures import MeasurementConfig, parse_measure
from pytest_ragmetrics.metrics import ideal_grades
from pytest_ragmetrics.results import normalize_results
from pytest_ragmetrics.report.tables import markdown_table, sample_size_note

__all__ = [
    "SWEEPABLE",
    "Ablation",
    "AblationError",
    "Chunking",
    "Row",
    "Setting",
    "ablate",
    "bind_metrics",
    "cached_factory",
    "parse_sweep",
    "render_json",
    "render_markdown",
    "stack_factory",
    "sweep_settings",
]

#: Parameters ``--sweep`` understands. ``chunk_size`` rebuilds the index; the others are search arguments.
SWEEPABLE = ("top_k", "fetch_k", "rrf_k", "chunk_size")

#: The reason printed for a rerank row when no cross-encoder was given.
NO_RERANKER = (
    "no cross-encoder given (--rerank-model PATH): none ships with this package or on PyPI, "
    "and a stand-in model would measure nothing"
)

_EPS = 1e-9


class AblationError(RagMetricsError, ValueError):
    """A setting, sweep or metric the ablation cannot run as asked."""


class Chunking(NamedTuple):
    """How the corpus is cut: ``size`` characters with ``overlap`` (``size=None``: whole documents)."""

    size: int | None
    overlap: int

    @classmethod
    def of(cls, size: int | None, overlap: int) -> "Chunking":
        """Normalised: whole documents have no overlap; an overlap that does not fit
        the size becomes a fifth of it (as ``Retriever.from_env`` does)."""
        if size is None:
            return cls(None, 0)
        if overlap >= size:
            overlap = size // 5
        return cls(size, overlap)

    @property
    def label(self) -> str:
        return "whole" if self.size is None else f"{self.size}/{self.overlap}"


@dataclass(frozen=True)
class Setting:
    """One row: how the retriever is asked.

    ``chunking``, ``rrf_k`` and ``unique_docs`` left at ``None`` mean "the
    retriever's own". ``label`` names the row (default: the mode).
    """

    mode: str = "hybrid"
    top_k: int = 10
    fetch_k: int = 30
    rrf_k: int | None = None
    chunking: Chunking | None = None
    unique_docs: bool | None = None
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or self.mode

    @property
    def base_mode(self) -> str:
        return self.mode.partition("+")[0]

    @property
    def reranks(self) -> bool:
        return self.mode.partition("+")[2] == "rerank"

    def search_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "top_k": self.top_k,
            "fetch_k": self.fetch_k,
            "mode": self.mode,
            "threshold": None,
        }
        if self.rrf_k is not None:
            kwargs["rrf_k"] = self.rrf_k
        if self.unique_docs is not None:
            kwargs["unique_docs"] = self.unique_docs
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.name,
            "mode": self.mode,
            "top_k": self.top_k,
            "fetch_k": self.fetch_k,
            "rrf_k": self.rrf_k,
            "chunk_size": self.chunking.size if self.chunking else None,
            "overlap": self.chunking.overlap if self.chunking else None,
            "unique_docs": self.unique_docs,
        }


# ------------------------------------------------------------------------------ metrics


def bind_metrics(specs: Sequence[str], top_k: int) -> tuple[list[str], list[str]]:
    """Columns and the metric names that fill them at ``top_k``.

    A spec is a metric name (``ndcg@10``, ``P@5``, ``mrr``) or a name with the
    literal cutoff ``k`` (``recall@k``), which follows each row's ``top_k``, as in
    seed 000's top_k table. Returns ``(columns, names)``: columns keep the ``@k``
    spelling, names are canonical (``precision@5``).
    """
    columns: list[str] = []
    names: list[str] = []
    for spec in specs:
        text = spec.strip()
        head, sep, tail = text.rpartition("@")
        if sep and tail.strip().lower() == "k":
            bound = parse_measure(f"{head}@{top_k}")
            column = f"{bound.name}@k"
        else:
            bound = parse_measure(text)
            column = str(bound)
        if column in columns:
            continue
        columns.append(column)
        names.append(str(bound))
    if not columns:
        raise AblationError("no metrics given")
    return columns, names


def _follows_top_k(column: str) -> bool:
    return column.endswith("@k")


# --------------------------------------------------------------------------------- rows


@dataclass
class Row:
    """The per-query metrics of one setting (or why it was skipped)."""

    setting: Setting
    columns: tuple[str, ...]
    #: the metric each column holds in this row (``recall@k`` -> ``recall@5`` at top_k 5)
    names: tuple[str, ...] = ()
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    unscorable: list[str] = field(default_factory=list)
    #: queries whose ranking held fewer documents than the deepest cutoff -> how many it held
    short: dict[str, int] = field(default_factory=dict)
    depth: int | None = None
    skipped: str | None = None
    seconds: float = 0.0
    chunks: int | None = None
    index_dir: str | None = None
    retriever: Any = None

    @property
    def label(self) -> str:
        return self.setting.name

    @property
    def n(self) -> int:
        return len(self.per_query)

    @property
    def aggregate(self) -> dict[str, float]:
        return mean_metrics(self.per_query.values(), self.columns)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": self.label,
            "setting": self.setting.to_dict(),
            "metrics": dict(zip(self.columns, self.names)),
        }
        if self.skipped is not None:
            out["skipped"] = self.skipped
            return out
        n = self.n
        out.update(
            n=n,
            aggregate=self.aggregate,
            per_query=self.per_query,
            unscorable=self.unscorable,
            short=self.short,
            seconds=round(self.seconds, 4),
            ms_per_query=round(1000 * self.seconds / max(n + len(self.unscorable), 1), 3),
            chunks=self.chunks,
            retriever=self.retriever,
        )
        return out


@dataclass
class Ablation:
    """Rows that differ in one parameter, measured on the same questions."""

    parameter: str
    columns: tuple[str, ...]
    rows: list[Row]
    questions: dict[str, str]
    tags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    config: MeasurementConfig | None = None
    title: str = ""

    @property
    def measured(self) -> list[Row]:
        return [r for r in self.rows if r.skipped is None]

    @property
    def n(self) -> int:
        rows = self.measured
        return rows[0].n if rows else 0

    def row(self, label: str) -> Row:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(label)

    # -- per-query breakdown ----------------------------------------------------------

    def differing(self, column: str | None = None) -> list[tuple[str, dict[str, float]]]:
        """Queries whose ``column`` value is not the same in every measured row.

        Returns ``(qid, {row label: value})``, the widest spread first (then
        golden-set order). A query scored in some rows only cannot differ.
        """
        column = column or self.columns[0]
        if column not in self.columns:
            raise AblationError(f"{column!r} is not a column of this table: {', '.join(self.columns)}")
        rows = self.measured
        if len(rows) < 2:
            return []
        order = {qid: i for i, qid in enumerate(self.questions)}
        out = []
        for qid in rows[0].per_query:
            if not all(qid in r.per_query for r in rows):
                continue
            values = {r.label: r.per_query[qid][column] for r in rows}
            spread = max(values.values()) - min(values.values())
            if spread > _EPS:
                out.append((spread, order.get(qid, math.inf), qid, values))
        out.sort(key=lambda t: (-t[0], t[1]))
        return [(qid, values) for _, _, qid, values in out]

    # -- rendering ----------------------------------------------------------------------

    def table(self, digits: int = 4) -> str:
        """Seed 000's table: one row per measured setting, one column per metric."""
        headers = [self.parameter, *self.columns]
        with_chunks = self.parameter == "chunk_size"
        if with_chunks:
            headers.insert(1, "chunks")
        body = []
        for r in self.measured:
            agg = r.aggregate
            cells: list[object] = [r.label, *(agg.get(c) for c in self.columns)]
            if with_chunks:
                cells.insert(1, f"{r.chunks:,}" if r.chunks is not None else None)
            body.append(cells)
        return markdown_table(headers, body, digits)

    def notes(self) -> list[str]:
        """What a reader must know to read the table: n and 1/n, skipped rows, capped rankings."""
        out = [sample_size_note(self.n)]
        for r in self.rows:
            if r.skipped is not None:
                out.append(f"{r.label}: skipped, {r.skipped}.")
        cut_columns = [c for c in self.columns if not _follows_top_k(c)]
        for r in self.measured:
            cutoffs = [parse_measure(c).cutoff for c in cut_columns]
            deepest = max((c for c in cutoffs if c is not None), default=None)
            if deepest is not None and r.setting.top_k < deepest:
                out.append(
                    f"{r.label}: top_k={r.setting.top_k} is below the @{deepest} cutoff, so those "
                    f"columns see at most {r.setting.top_k} documents (what the application would get)."
                )
            elif r.short:
                fewest = min(r.short.values())
                why = []
                if r.setting.base_mode == "bm25":
                    why.append("BM25 returns only documents sharing a word with the question")
                whole = isinstance(r.retriever, dict) and r.retriever.get("chunk_size", 0) is None
                if not r.setting.unique_docs and not whole:
                    why.append("chunks of one document count once; --unique-docs fills the ranking "
                               "with distinct documents")
                hint = f" ({'; '.join(why)})" if why else ""
                out.append(
                    f"{r.label}: {len(r.short)} of {r.n} queries came back with fewer than {r.depth} "
                    f"distinct documents (fewest {fewest}), so metrics at that depth are capped{hint}."
                )
        raised = [r for r in self.measured
                  if r.setting.fetch_k < r.setting.top_k and (r.setting.base_mode == "hybrid" or r.setting.reranks)]
        if raised:
            labels = ", ".join(r.label for r in raised)
            out.append(
                f"{labels}: fetch_k is below top_k, and the stack then takes top_k candidates from each "
                f"route, so these rows measure fetch_k = top_k."
            )
        unscorable = next((r.unscorable for r in self.measured if r.unscorable), [])
        if unscorable:
            level = self.config.relevance_level if self.config else 1
            out.append(
                f"{len(unscorable)} questions have no relevant document at level {level} and are not "
                f"scored (never counted as 0), e.g. {unscorable[0]!r}."
            )
        if any(_follows_top_k(c) for c in self.columns) and len({r.setting.top_k for r in self.measured}) > 1:
            out.append("@k columns are cut at each row's top_k; nDCG@k is not comparable across different k.")
        return out

    def breakdown(self, column: str | None = None, width: int = 72, limit: int | None = None) -> str:
        """The questions that moved, as a Markdown table (plus a count, and counts per tag)."""
        column = column or self.columns[0]
        moved = self.differing(column)
        rows = self.measured
        if len(rows) < 2:
            return f"Per-query breakdown ({column}): needs two measured rows."
        n = self.n
        lines = [
            f"{len(moved)} of {n} questions score differently across rows on {column}; "
            f"the other {n - len(moved)} score the same in every row."
        ]
        tag_names = sorted({t for q in self.questions for t in self.tags.get(q, ())})
        if moved and tag_names:
            moved_ids = {qid for qid, _ in moved}
            scored = rows[0].per_query
            parts = []
            for tag in tag_names:
                total = sum(1 for q in scored if tag in self.tags.get(q, ()))
                hit = sum(1 for q in moved_ids if tag in self.tags.get(q, ()))
                if total:
                    parts.append(f"{tag} {hit}/{total}")
            lines.append("By tag (moved/scored): " + ", ".join(parts) + ".")
        if not moved:
            return "\n".join(lines)
        shown = moved if limit is None else moved[:limit]
        headers = ["query", "question", *(r.label for r in rows)]
        if tag_names:
            headers.insert(2, "tags")
        body = []
        for qid, values in shown:
            text = " ".join(self.questions.get(qid, "").split())
            if len(text) > width:
                text = text[: width - 1].rstrip() + "…"
            cells: list[object] = [qid, text, *(values[r.label] for r in rows)]  # markdown_table escapes
            if tag_names:
                cells.insert(2, ",".join(self.tags.get(qid, ())))
            body.append(cells)
        lines.append("")
        lines.append(markdown_table(headers, body))
        if len(shown) < len(moved):
            lines.append(f"({len(moved) - len(shown)} more; JSON output lists every query.)")
        return "\n".join(lines)

    def to_dict(self, breakdown_column: str | None = None) -> dict[str, Any]:
        column = breakdown_column or self.columns[0]
        return {
            "parameter": self.parameter,
            "title": self.title,
            "columns": list(self.columns),
            "n": self.n,
            "one_over_n": (1 / self.n) if self.n else None,
            "notes": self.notes(),
            "rows": [r.to_dict() for r in self.rows],
            "differing": {
                "column": column,
                "queries": [{"qid": q, "values": v} for q, v in self.differing(column)],
            },
        }


# ----------------------------------------------------------------------------- running

RetrieverFactory = Callable[[Chunking | None], Any]


def cached_factory(make: Callable[[Chunking | None], Any]) -> RetrieverFactory:
    """Wrap ``make(chunking)`` so each chunking is built once (tables share their indexes)."""
    built: dict[Chunking | None, Any] = {}

    def factory(chunking: Chunking | None) -> Any:
        if chunking not in built:
            built[chunking] = make(chunking)
        return built[chunking]

    factory.built = built  # type: ignore[attr-defined]
    return factory


def _as_factory(retriever: Any) -> RetrieverFactory:
    if callable(getattr(retriever, "search_batch", None)):
        own = Chunking.of(getattr(retriever, "chunk_size", None), getattr(retriever, "overlap", 0)) \
            if hasattr(retriever, "chunk_size") else None

        def single(chunking: Chunking | None) -> Any:
            if chunking is not None and chunking != own:
                raise AblationError(
                    f"chunking {chunking.label} needs an index of its own; this retriever is built with "
                    f"{own.label if own else 'its own chunking'}: pass a factory (see stack_factory)"
                )
            return retriever

        return single
    if callable(retriever):
        return retriever  # type: ignore[no-any-return]
    raise AblationError(
        f"expected a retriever with search_batch(...) or a factory, got {type(retriever).__name__}"
    )


def _chunk_count(retriever: Any) -> int | None:
    chunks = getattr(retriever, "chunks", None)
    try:
        return len(chunks) if chunks is not None else None
    except TypeError:
        return None


def _describe(retriever: Any) -> Any:
    describe = getattr(retriever, "describe", None)
    if not callable(describe):
        return type(retriever).__name__
    try:
        return describe()
    except Exception as exc:  # describing is optional; never fail a row on it
        return f"{type(retriever).__name__} (describe() raised {exc!r})"


def ablate(
    golden: GoldenSet,
    retriever: Any,
    settings: Iterable[Setting],
    config: MeasurementConfig | None = None,
    *,
    metrics: Sequence[str] | None = None,
    parameter: str = "mode",
    title: str = "",
) -> Ablation:
    """Run every golden question through every setting and score it.

    - ``retriever``: an object with the stack's ``search_batch`` (all settings
      must then use its chunking), or a factory ``f(chunking) -> retriever``
      (``chunking`` is ``None`` for "the default one"), e.g. :func:`stack_factory`.
    - ``config``: relevance level, gain, id separator and, unless ``metrics`` is
      given, the metrics (the columns).
    - ``metrics``: column specs overriding ``config.measures``; ``name@k`` follows
      each setting's ``top_k``.

    Each setting is one ``search_batch`` call over all questions. A rerank
    setting on a retriever without a cross-encoder is kept as a skipped row with
    the reason; every other error propagates.
    """
    config = config or MeasurementConfig()
    specs = list(metrics) if metrics else config.metric_names
    settings = list(settings)
    if not settings:
        raise AblationError("no settings to compare")
    labels = [s.name for s in settings]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise AblationError(f"two settings share the row label {dupes[0]!r}; give them distinct labels")
    columns, _ = bind_metrics(specs, settings[0].top_k)
    factory = _as_factory(retriever)
    queries = list(golden)
    texts = [q.text for q in queries]
    ideals = {q.qid: ideal_grades(q.judgments) for q in queries}
    rows: list[Row] = []
    prepared: set[int] = set()
    for setting in settings:
        row_columns, names = bind_metrics(specs, setting.top_k)
        row = Row(setting, tuple(row_columns), tuple(names))
        rows.append(row)
        r = factory(setting.chunking)
        if setting.reranks and getattr(r, "reranker", "n/a") is None:
            row.skipped = NO_RERANKER
            continue
        if setting.base_mode != "bm25" and id(r) not in prepared:  # build outside the timed search
            build = getattr(r, "build", None)  # (a BM25-only table never embeds the corpus)
            if callable(build):
                build()
            prepared.add(id(r))
        cfg = replace(config, measures=tuple(names))
        row.depth = cfg.depth
        row.chunks = _chunk_count(r)
        data_dir = getattr(r, "data_dir", None)
        row.index_dir = str(data_dir) if data_dir is not None else None
        row.retriever = _describe(r)
        t0 = time.perf_counter()
        results = r.search_batch(texts, **setting.search_kwargs())
        row.seconds = time.perf_counter() - t0
        results = list(results)
        if len(results) != len(queries):
            raise AblationError(
                f"{setting.name}: search_batch returned {len(results)} result lists for {len(queries)} questions"
            )
        for q, res in zip(queries, results):
            returned = normalize_results(res, setting.top_k, q.qid)
            docs, scored = score_query(returned.ids, q.judgments, cfg, ideals[q.qid])
            if scored is None:
                row.unscorable.append(q.qid)
                continue
            row.per_query[q.qid] = {col: scored[name] for col, name in zip(row_columns, names)}
            if cfg.depth is not None and len(docs) < cfg.depth:
                row.short[q.qid] = len(docs)
    return Ablation(
        parameter=parameter,
        columns=tuple(columns),
        rows=rows,
        questions={q.qid: q.text for q in queries},
        tags={q.qid: tuple(q.tags) for q in queries},
        config=config,
        title=title,
    )


# ------------------------------------------------------------------------------- sweeps


def _int_value(param: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise AblationError(f"--sweep {param}: {raw!r} is not an integer") from None
    if value < minimum:
        raise AblationError(f"--sweep {param}: {value} must be >= {minimum}")
    return value


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``"top_k=5,10,20"`` -> ``("top_k", [5, 10, 20])``; chunk sizes may be ``none``/``whole``."""
    param, sep, raw = text.partition("=")
    param = param.strip().replace("-", "_")
    if not sep or not raw.strip():
        raise AblationError(f"--sweep {text!r}: write it as PARAM=V1,V2,... e.g. top_k=5,10,20")
    if param not in SWEEPABLE:
        raise AblationError(f"--sweep {text!r}: cannot sweep {param!r}; sweepable: {', '.join(SWEEPABLE)}")
    values: list[Any] = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        if param == "chunk_size":
            value: Any = None if part.lower() in ("none", "whole", "0") else _int_value(param, part, 1)
        else:
            value = _int_value(param, part, 0 if param == "rrf_k" else 1)
        if value not in values:
            values.append(value)
    if not values:
        raise AblationError(f"--sweep {text!r}: no values")
    return param, values


def sweep_settings(base: Setting, param: str, values: Sequence[Any], overlap: int = 60) -> list[Setting]:
    """One setting per value of ``param``, everything else as in ``base``; labelled by the value."""
    out = []
    for value in values:
        if param == "chunk_size":
            chunking = Chunking.of(value, overlap)
            out.append(replace(base, chunking=chunking, label=chunking.label))
        elif param in ("top_k", "fetch_k", "rrf_k"):
            out.append(replace(base, **{param: value}, label=str(value)))
        else:
            raise AblationError(f"cannot sweep {param!r}; sweepable: {', '.join(SWEEPABLE)}")
    return out


# ------------------------------------------------------------------------ the stack


def stack_factory(
    corpus: str | Path,
    *,
    data_dir: str | Path | None = None,
    default_chunking: Chunking = Chunking(300, 60),
    rerank_model: str | Path | None = None,
    model: str | Path | None = None,
    embed_backend: str | None = None,
    on_build: Callable[[Chunking, Any], None] | None = None,
    vectors: bool = True,
    **retriever_kwargs: Any,
) -> RetrieverFactory:
    """A cached factory of reference-stack retrievers over ``corpus``, one per chunking.

    One embedder (and one cross-encoder) is shared by all of them. Each
    chunking gets its own index: ``data_dir/chunks-<size>-<overlap>`` (or
    ``whole``) when ``data_dir`` is given, else the stack's settings-hashed
    directory under ``RAGMETRICS_HOME``. Each retriever is built when made
    (BM25 only with ``vectors=False``: a BM25-only comparison never embeds the
    corpus); ``embed_backend`` picks the encoder (torch, onnx, onnx-int8) of the
    shared embedder; ``on_build(chunking, retriever)`` is called after each build (the CLI
    prints ``retriever.build_stats``).
    """
    from pytest_ragmetrics.stack import Embedder, Reranker, Retriever
    from pytest_ragmetrics.stack.paths import cache_path

    embedder = Embedder(model, cache_path=cache_path(), backend=embed_backend or "torch")
    reranker = Reranker(rerank_model) if rerank_model is not None else None

    def make(chunking: Chunking | None) -> Any:
        chunking = chunking or default_chunking
        folder = None
        if data_dir is not None:
            name = "whole" if chunking.size is None else f"chunks-{chunking.size}-{chunking.overlap}"
            folder = Path(data_dir) / name
        r = Retriever(
            corpus,
            data_dir=folder,
            chunk_size=chunking.size,
            overlap=chunking.overlap,
            embedder=embedder,
            rerank_model=reranker,
            **retriever_kwargs,
        )
        if vectors:
            r.build()
        else:  # the BM25 index alone, through the public search (it builds on first use)
            t0 = time.perf_counter()
            r.search_batch(["index warm-up"], top_k=1, mode="bm25")
            r.build_stats = {
                "documents": len(r.documents),
                "chunks": len(r.chunks),
                "encoded": 0,
                "vector_index_rebuilt": None,
                "bm25_seconds": round(time.perf_counter() - t0, 3),
                "vector_seconds": None,
            }
        if on_build is not None:
            on_build(chunking, r)
        return r

    cached = cached_factory(make)

    def factory(chunking: Chunking | None) -> Any:
        return cached(chunking or default_chunking)

    factory.built = cached.built  # type: ignore[attr-defined]
    return factory


# ---------------------------------------------------------------------------- output


def render_markdown(
    ablations: Sequence[Ablation],
    *,
    breakdown: bool = True,
    column: str | None = None,
    limit: int | None = None,
) -> str:
    """Each table with its notes, then (with ``breakdown``) the questions that moved."""
    out: list[str] = []
    for ab in ablations:
        if ab.title:
            out.append(f"## {ab.title}")
            out.append("")
        out.append(ab.table())
        out.append("")
        out.extend(ab.notes())
        if len(ab.measured) >= 2:
            out.append("")
            col = column if column in ab.columns else ab.columns[0]
            if breakdown:
                out.append(f"### Questions that moved ({col})")
                out.append("")
                out.append(ab.breakdown(col, limit=limit))
            else:
                moved = len(ab.differing(col))
                out.append(
                    f"{moved} of {ab.n} questions score differently across rows on {col} "
                    f"(--per-query lists them)."
                )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_json(ablations: Sequence[Ablation], extra: Mapping[str, Any] | None = None,
                column: str | None = None) -> dict[str, Any]:
    config = next((ab.config for ab in ablations if ab.config is not None), None)
    payload: dict[str, Any] = dict(extra or {})
    payload["config"] = config.to_dict() if config else None
    payload["tables"] = [ab.to_dict(column if column in ab.columns else None) for ab in ablations]
    return payload
