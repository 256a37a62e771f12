"""Ablations and sweeps: one loop over settings gives one table, and the queries that moved.

When mode and parameters are arguments of one ``search_batch`` call, comparing
``bm25`` / ``vector`` / ``hybrid`` / ``hybrid+rerank``, or sweeping ``top_k``,
``fetch_k``, ``rrf_k`` or ``chunk_size``, is a loop, and every row of its table is
measured the same way (same golden set, same :class:`MeasurementConfig`, same id
mapping and dedup). Each row keeps its per-query values, because a mean that
moved says nothing about which questions did.

This module is the data model (:class:`Setting`, :class:`Row`, :class:`Ablation`)
and the runner (:func:`ablate`); :mod:`pytest_ragmetrics.report.ablation`
renders it. It works on plain objects: a retriever with the reference stack's
``search_batch(queries, top_k, fetch_k, mode, threshold, rerank=, rrf_k=,
unique_docs=)``, or a factory that builds one per chunking (chunking changes the
index, so each chunking needs a retriever, and an index directory, of its own),
e.g. :func:`pytest_ragmetrics.stack.factory.stack_factory`.

Sweeps vary one parameter at a time around the base setting, so that a row
differs from the base in one cause only; they are not a grid.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.evaluation import mean_metrics, score_query
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.measures import MeasurementConfig, parse_measure, parse_measures
from pytest_ragmetrics.metrics import ideal_grades
from pytest_ragmetrics.progress import resolve as resolve_progress
from pytest_ragmetrics.results import normalize_results
from pytest_ragmetrics.stack.factory import Chunking, RetrieverFactory
from pytest_ragmetrics.tools.sources import SEARCH_SLICE, search_in_slices

__all__ = [
    "NO_RERANKER",
    "PARAMETER_NAMES",
    "SEARCH_SLICE",
    "SWEEPABLE",
    "Ablation",
    "AblationError",
    "Row",
    "Setting",
    "ablate",
    "bind_metrics",
    "sweep_settings",
]

#: Parameters :func:`sweep_settings` can vary. ``chunk_size`` rebuilds the index; the others are search arguments.
SWEEPABLE = ("top_k", "fetch_k", "rrf_k", "chunk_size", "fusion", "route_weights")

#: How notes name the settings a reader can change: by the library's parameters. A caller
#: that exposes them under other names (a command's flags) passes its own to :func:`ablate`.
PARAMETER_NAMES: Mapping[str, str] = MappingProxyType({
    "rerank_model": "rerank_model",  # the cross-encoder a rerank row needs
    "unique_docs": "unique_docs=True",  # rankings of distinct documents
    "breakdown": "breakdown=True",  # the per-query table under each comparison
})

#: Why a rerank row is skipped when the retriever has no cross-encoder; ``{rerank_model}``
#: is filled in with how the caller names that setting (see :data:`PARAMETER_NAMES`).
NO_RERANKER = (
    "no cross-encoder given ({rerank_model}): none ships with this package or on PyPI, "
    "and a stand-in model would measure nothing"
)

_EPS = 1e-9



class AblationError(RagMetricsError, ValueError):
    """A setting, sweep or metric the ablation cannot run as asked."""


@dataclass(frozen=True)
class Setting:
    """One row: how the retriever is asked.

    ``chunking``, ``rrf_k``, ``unique_docs``, ``fusion`` and ``route_weights``
    left at ``None`` mean "the retriever's own". ``route_weights`` is written as
    the retriever takes it (``"1:0.5"``: bm25 1, vector 0.5). ``label`` names the
    row (default: the mode).
    """

    mode: str = "hybrid"
    top_k: int = 10
    fetch_k: int = 30
    rrf_k: int | None = None
    chunking: Chunking | None = None
    unique_docs: bool | None = None
    fusion: str | None = None
    route_weights: str | None = None
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
        if self.fusion is not None:
            kwargs["fusion"] = self.fusion
        if self.route_weights is not None:
            kwargs["route_weights"] = self.route_weights
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.name,
            "mode": self.mode,
            "top_k": self.top_k,
            "fetch_k": self.fetch_k,
            "rrf_k": self.rrf_k,
            "fusion": self.fusion,
            "route_weights": self.route_weights,
            "chunk_size": self.chunking.size if self.chunking else None,
            "overlap": self.chunking.overlap if self.chunking else None,
            "unique_docs": self.unique_docs,
        }


# ------------------------------------------------------------------------------ metrics


def bind_metrics(specs: Sequence[str], top_k: int) -> tuple[list[str], list[str]]:
    """Columns and the metric names that fill them at ``top_k``.

    A spec is a metric name (``ndcg@10``, ``P@5``, ``mrr``) or a name with the
    literal cutoff ``k`` (``recall@k``), which follows each row's ``top_k``, so a
    top_k sweep measures each row at the depth an application would read.
    Returns ``(columns, names)``: columns keep the ``@k`` spelling, names are
    canonical (``precision@5``).
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
    #: how notes name the settings a reader can change (see :data:`PARAMETER_NAMES`)
    spelling: Mapping[str, str] = field(default_factory=lambda: PARAMETER_NAMES)
    #: questions marked answerable: false, left out: they have no recall, MRR or nDCG to compare
    no_answer: list[str] = field(default_factory=list)

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


# ----------------------------------------------------------------------------- running


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
        return retriever
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


def _search(retriever: Any, texts: list[str], setting: Setting, row: Row, progress: Any, task: str) -> list[Any]:
    """Every question's results, asked :data:`SEARCH_SLICE` at a time; the time spent goes to ``row``."""
    kwargs = setting.search_kwargs()

    def timed(part: list[str]) -> list[Any]:
        t0 = time.perf_counter()
        found = list(retriever.search_batch(part, **kwargs))
        row.seconds += time.perf_counter() - t0
        return found

    return search_in_slices(timed, texts, progress, task, setting.name, wrap_errors=False, error=AblationError)


def ablate(
    golden: GoldenSet,
    retriever: Any,
    settings: Iterable[Setting],
    config: MeasurementConfig | None = None,
    *,
    metrics: Sequence[str] | None = None,
    parameter: str = "mode",
    title: str = "",
    spelling: Mapping[str, str] | None = None,
    progress: Any = None,
) -> Ablation:
    """Run every golden question through every setting and score it.

    - ``retriever``: an object with the stack's ``search_batch`` (all settings
      must then use its chunking), or a factory ``f(chunking) -> retriever``
      (``chunking`` is ``None`` for "the default one"), e.g.
      :func:`pytest_ragmetrics.stack.factory.stack_factory`.
    - ``config``: relevance level, gain, id separator and, unless ``metrics`` is
      given, the metrics (the columns).
    - ``metrics``: column specs overriding ``config.measures``; ``name@k`` follows
      each setting's ``top_k``.
    - ``spelling``: how the notes name the settings a reader can change, for a
      caller whose users know them by other names (a command's flags); missing
      keys keep :data:`PARAMETER_NAMES`.
    - ``progress``: where each setting's search is shown as it goes (questions done of
      all); a :class:`pytest_ragmetrics.progress.Progress`, a mode (``bar``, ``lines``,
      ``off``) or None for the default.

    Each setting asks ``search_batch`` for :data:`SEARCH_SLICE` questions at a time. A rerank
    setting on a retriever without a cross-encoder is kept as a skipped row with
    the reason; every other error propagates.
    """
    config = config or MeasurementConfig()
    progress = resolve_progress(progress)
    spelling = {**PARAMETER_NAMES, **(spelling or {})}
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
    queries = [q for q in golden if q.answerable]  # the others have no metric an ablation compares
    texts = [q.text for q in queries]
    ideals = {q.qid: ideal_grades(q.judgments) for q in queries}
    rows: list[Row] = []
    prepared: set[int] = set()
    for setting in settings:
        row_columns, measures = bind_metrics(specs, setting.top_k)
        row = Row(setting, tuple(row_columns), tuple(measures))
        rows.append(row)
        r = factory(setting.chunking)
        if setting.reranks and getattr(r, "reranker", "n/a") is None:
            row.skipped = NO_RERANKER.format_map(spelling)
            continue
        if setting.base_mode != "bm25" and id(r) not in prepared:  # build outside the timed search
            build = getattr(r, "build", None)  # (a BM25-only table never embeds the corpus)
            if callable(build):
                build()
            prepared.add(id(r))
        cfg = replace(config, measures=parse_measures(measures))
        row.depth = cfg.depth
        row.chunks = _chunk_count(r)
        data_dir = getattr(r, "data_dir", None)
        row.index_dir = str(data_dir) if data_dir is not None else None
        row.retriever = _describe(r)
        results = _search(r, texts, setting, row, progress, f"searching {parameter} {setting.name}")
        for q, res in zip(queries, results):
            returned = normalize_results(res, setting.top_k, q.qid)
            docs, scored = score_query(returned.ids, q.judgments, cfg, ideals[q.qid])
            if scored is None:
                row.unscorable.append(q.qid)
                continue
            row.per_query[q.qid] = {col: scored[name] for col, name in zip(row_columns, measures)}
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
        spelling=spelling,
        no_answer=[q.qid for q in golden if not q.answerable],
    )


# ------------------------------------------------------------------------------- sweeps


def sweep_settings(base: Setting, param: str, values: Sequence[Any], overlap: int = 60) -> list[Setting]:
    """One setting per value of ``param``, everything else as in ``base``; labelled by the value."""
    out = []
    for value in values:
        if param == "chunk_size":
            chunking = Chunking.of(value, overlap)
            out.append(replace(base, chunking=chunking, label=chunking.label))
        elif param in ("top_k", "fetch_k", "rrf_k", "fusion", "route_weights"):
            out.append(replace(base, **{param: value}, label=str(value)))
        else:
            raise AblationError(f"cannot sweep {param!r}; sweepable: {', '.join(SWEEPABLE)}")
    return out
