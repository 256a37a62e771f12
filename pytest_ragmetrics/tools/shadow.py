"""Shadow comparison: how differently two retrievers (or two runs) rank the same questions, without labels.

Before labels exist, a new retriever B can still be compared with the one in production, A:
on the logged or golden questions, how much of B's top k does A also return, how much
does the order agree at the top, and which questions changed most. Those questions are
where labels are worth their cost, so their documents from both sides can be written as
candidates for ``ragmetrics annotate``.

Per question, on the top ``k`` documents of each side (ids mapped to documents and
repeats dropped, as the gate judges them):

- **overlap@k** = |A ∩ B| / max(|A|, |B|): the usual |A ∩ B| / k when both return k
  documents, and 1 for two identical shorter lists (two empty lists: 1);
- **RBO** (rank-biased overlap, Webber, Moffat and Zobel 2010, persistence p = 0.9): the
  extrapolated point estimate RBO_ext of their Eq. 32, for lists of unequal length too
  (Eq. 30 when both are as long). It weighs agreement at depth d by p^(d-1), so with
  p = 0.9 the top 10 ranks carry 86 % of the weight (the paper's Eq. 21); identical lists score 1, disjoint 0,
  two empty lists 1 and one empty list against a non-empty one 0;
- **new in B**: the share of B's top k that A never returned (not among A's results, which
  go to ``depth`` >= k when asked deeper).

The most-changed questions come first: lowest of RBO and overlap@k, then lowest RBO, lowest
overlap, most new. A side that returns fewer than k documents is marked ``short``: RBO_ext
extrapolates the agreement of a short list, so B returning only A's first two documents scores
RBO 1, and its overlap@k (2 / k) is what orders it among the changed.

Filters: a question with ``filters`` is searched with ``search(query, k, filters=...)``, one
without as ``search(query, k)`` (:func:`search_with_filters`), so a retriever that takes no
filters works on questions that have none.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragmetrics.errors import InputError, RagMetricsError, listed
from pytest_ragmetrics.files import json_lines, read_text
from pytest_ragmetrics.metrics import document_of
from pytest_ragmetrics.progress import resolve as resolve_progress
from pytest_ragmetrics.protocol import accepts_filters, search_with_filters
from pytest_ragmetrics.report.tables import counted, fmt, markdown_table
from pytest_ragmetrics.tools.pool import PooledQuery, PoolQuery, pool_sources
from pytest_ragmetrics.tools.sources import Entry, Ranked, Source, best_per_document, ranked_entries

__all__ = ["RBO_P", "ShadowQuery", "Side", "ShadowReport", "read_questions", "search_with_filters", "rbo_ext",
           "overlap_at_k", "retriever_side", "run_side", "compare_sides", "shadow_text", "shadow_candidates"]

#: RBO's persistence: agreement at depth d weighs p^(d-1); with 0.9 the top 10 ranks carry 86 % of the weight.
RBO_P = 0.9


@dataclass(frozen=True)
class ShadowQuery:
    """A question to replay: its id, text, filters (None when it has none) and tags; ``shown``, when
    set, is the text reports show instead (a raw log's question, redacted)."""

    qid: str
    text: str
    filters: Mapping[str, Any] | None = None
    tags: tuple[str, ...] = ()
    shown: str | None = None

    @property
    def display(self) -> str:
        return self.text if self.shown is None else self.shown


# ----------------------------------------------------------------------------- questions


def read_questions(path: str | Path) -> list[ShadowQuery]:
    """The questions of a JSONL file (a query log, a draft from ``ragmetrics sample``, a golden or
    candidates file: ``query``, optional ``qid`` (else ``line-N``), ``filters`` and ``tags``), or of
    any golden set or question file ``ragmetrics pool --queries`` reads."""
    p = Path(path)
    if p.suffix.lower() in (".jsonl", ".ndjson") and not p.is_dir():
        return _read_jsonl(p)
    from pytest_ragmetrics.tools.pool import read_queries

    if p.suffix.lower() in (".yaml", ".yml") or p.is_dir():
        from pytest_ragmetrics.golden import load_golden

        try:
            golden = load_golden(p)
        except InputError:
            golden = None
        if golden is not None:  # a golden set that records filters on its questions keeps them
            return [ShadowQuery(q.qid, q.text, getattr(q, "filters", None) or None, tuple(q.tags)) for q in golden]
    return [ShadowQuery(q.qid, q.text, None, q.tags) for q in read_queries(p)]


def _read_jsonl(path: Path) -> list[ShadowQuery]:
    """A JSONL file's questions. A raw query log (no ``_meta`` line, no ``qid``: not a draft from
    ``ragmetrics sample`` nor a golden or candidates file) has not been redacted: its questions are
    searched as logged, and shown redacted (:func:`~pytest_ragmetrics.tools.sample.redact`) in every
    report and file written from them."""
    from pytest_ragmetrics.tools.candidates import unique_qid
    from pytest_ragmetrics.tools.sample import logged_question, redact

    name = str(path)
    out: list[ShadowQuery] = []
    seen: dict[str, int] = {}
    described = False  # a _meta line: a file written by ragmetrics (a draft, candidates)
    for number, record in json_lines(path):
        where = f"line {number}"
        if isinstance(record, dict) and "_meta" in record and not out:  # how the file was made: not a question
            described = True
            continue
        text, filters = logged_question(record, name, where)
        qid, where = unique_qid(record.get("qid", f"line-{number}"), name, where, seen, number)
        tags = record.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InputError(name, where, "tags must be a list of strings")
        out.append(ShadowQuery(qid, text, filters or None, tuple(tags)))
    if not out:
        raise InputError(name, None, "no questions found")
    if not described and all(q.qid.startswith("line-") for q in out):  # a raw log: never copied out unredacted
        out = [ShadowQuery(q.qid, q.text, q.filters, q.tags, redact(q.text)) for q in out]
    return out


# ------------------------------------------------------------------------------- sides


@dataclass
class Side:
    """One side of the comparison: its source, and per question its documents, best first."""

    source: Source
    rankings: dict[str, list[Entry]]
    #: questions this side has no ranking for (a run without them, an errored query)
    missing: list[str] = field(default_factory=list)
    #: the depth each ranking was asked to (or recorded at): "never returned" looks this deep
    depth: int | None = None


def retriever_side(source: Source, retriever: Any, questions: Sequence[ShadowQuery], depth: int,
                   id_separator: str | None, progress: Any = None) -> Side:
    """Search every question (its filters replayed) for ``depth`` results; ids are mapped to
    documents by ``id_separator`` and repeats dropped, as the gate does."""
    filtered = [q.qid for q in questions if q.filters]
    label = f"retriever {source.name!r} ({source.spec})"
    if filtered and not accepts_filters(retriever.search):  # the plugin's and pool's check
        raise RagMetricsError(f"{label}: search() takes no filters= argument, but "
                              f"{counted(len(filtered), 'question has', 'questions have')} filters to replay "
                              f"({listed(filtered, 5)}): give search a filters=None keyword")
    progress = resolve_progress(progress)
    rankings: dict[str, list[Entry]] = {}
    progress.start(f"searching {source.name}", len(questions), "questions")
    try:
        for q in questions:
            try:
                items = search_with_filters(retriever, q.text, depth, q.filters)
                if items is not None and not isinstance(items, (str, bytes, Mapping)):
                    items = list(items)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                text = str(exc).strip().splitlines()
                raise RagMetricsError(f"{label}: search raised on question {q.qid!r}: {type(exc).__name__}"
                                      f"{': ' + text[0] if text else ''}") from None
            rankings[q.qid] = ranked_entries(items, depth, q.qid, id_separator, label)
            progress.advance(1)
    finally:
        progress.finish()
    return Side(source, rankings, depth=depth)


_RECORDED = object()  # run_side's default separator: the one the run was measured with


def run_side(path: str | Path, name: str, id_separator: Any = _RECORDED) -> tuple[Side, int | None]:
    """The rankings a run artifact (``--rag-report``) or a baseline records, per query: its
    ``_top`` (the top k, best first; ``ranking`` in artifacts written before it), and its k.

    Ids are mapped to documents by ``id_separator`` (by default the one the run recorded, else
    ``#``) and repeats dropped, as in retriever mode. A ranking longer than the run's k is refused
    (the artifact's schema refuses such a ``_top``; this covers ``ranking`` and baselines)."""
    from pytest_ragmetrics.gate.artifact import parse_run_json
    from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR

    p = Path(path)
    data = parse_run_json(read_text(p), str(p))
    meta, per_query = (data["_meta"], data["per_query"]) if isinstance(data, dict) else (data.meta, data.per_query)
    k = meta.get("k") if isinstance(meta, Mapping) else None
    k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None
    if id_separator is _RECORDED:
        measurement = meta.get("measurement") if isinstance(meta, Mapping) else None
        id_separator = measurement.get("id_separator", DEFAULT_ID_SEPARATOR) \
            if isinstance(measurement, Mapping) else DEFAULT_ID_SEPARATOR
        id_separator = id_separator if isinstance(id_separator, str) and id_separator else None
    rankings: dict[str, list[Entry]] = {}
    missing = []
    for qid, entry in per_query.items():
        top = entry.get("_top") if isinstance(entry, Mapping) else None
        if top is None and isinstance(entry, Mapping):
            top = entry.get("ranking")
        if top is None or (isinstance(entry, Mapping) and entry.get("status") == "error"):
            missing.append(qid)
            continue
        if k is not None and len(top) > k:
            raise InputError(str(p), f"per_query.{qid}", f"ranks {len(top)} documents, more than the k = {k} the run "
                                                         "recorded (_meta.k): the file was edited")
        entries = [Entry(rid, document_of(rid, id_separator)) for rid in top if isinstance(rid, str)]
        rankings[qid] = best_per_document(entries, len(entries))
    if not rankings:
        raise InputError(str(p), None, f"none of its {counted(len(per_query), 'query', 'queries')} records a ranking "
                                       "(_top): it was written before rankings were recorded, or every query "
                                       "errored; run pytest --rag-eval --rag-report again")
    return Side(Source(name, "run", str(path)), rankings, missing, depth=k), k


# ------------------------------------------------------------------------------ measures


def overlap_at_k(a: Sequence[str], b: Sequence[str]) -> float:
    """|A ∩ B| / max(|A|, |B|) of two top-k lists (1 for two empty lists)."""
    longest = max(len(a), len(b))
    return len(set(a) & set(b)) / longest if longest else 1.0


def rbo_ext(a: Sequence[str], b: Sequence[str], p: float = RBO_P) -> float:
    """Rank-biased overlap, extrapolated (RBO_ext, Webber, Moffat and Zobel 2010, Eq. 32) of two
    rankings without repeated items, of equal or unequal length.

    With S the shorter list (length s), L the longer (length l; ``n`` in the code) and X_d the
    overlap of their first d items (for d > s, of all of S with the first d of L)::

        RBO_ext = (1-p)/p * (sum_{d=1..l} X_d/d p^d + sum_{d=s+1..l} X_s (d-s)/(s d) p^d)
                  + ((X_l - X_s)/l + X_s/s) p^l

    which is Eq. 30 when s = l. Two empty lists score 1, one empty list 0.
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if list(a) == list(b):  # exactly 1, not 1 within float error: "identical" must read as identical
        return 1.0
    if not a or not b:
        return 0.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, n = len(short), len(long_)
    seen_s: set[str] = set()
    seen_l: set[str] = set()
    x = x_s = 0
    total = 0.0
    for d in range(1, n + 1):
        v = long_[d - 1]
        if d <= s:
            u = short[d - 1]
            if u == v:
                x += 1
            else:
                x += (u in seen_l) + (v in seen_s)
            seen_s.add(u)
            seen_l.add(v)
            if d == s:
                x_s = x
        else:
            x += v in seen_s
            total += x_s * (d - s) / (s * d) * p ** d
        total += x / d * p ** d
    value = (1 - p) / p * total + ((x - x_s) / n + x_s / s) * p ** n
    return min(1.0, max(0.0, value))  # float error only: the exact value lies in [0, 1]


# ---------------------------------------------------------------------------- comparing


@dataclass
class ShadowRow:
    """One question compared: both top-k document lists and the three measures."""

    qid: str
    query: str
    filters: Mapping[str, Any] | None
    a: list[str]
    b: list[str]
    overlap: float
    rbo: float
    new_in_b: list[str]  # B's top-k documents A never returned
    #: the sides ("A", "B") that returned fewer than k documents: RBO_ext extrapolates a short list's
    #: agreement, so B returning only A's first two documents scores 1; overlap@k tells
    short: tuple[str, ...] = ()

    @property
    def new_share(self) -> float:
        return len(self.new_in_b) / len(self.b) if self.b else 0.0

    @property
    def changed(self) -> float:
        """How much the rankings agree, the lower the more changed: the lower of RBO and overlap@k."""
        return min(self.rbo, self.overlap)

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "query": self.query, "filters": dict(self.filters) if self.filters else None,
                "a": self.a, "b": self.b, "overlap": self.overlap, "rbo": self.rbo, "new_in_b": self.new_in_b,
                "new_share": self.new_share, "short": list(self.short)}


@dataclass
class ShadowReport:
    a: Side
    b: Side
    k: int
    p: float
    rows: list[ShadowRow]  # most changed first
    #: questions a side has no ranking for: not compared
    missing_a: list[str] = field(default_factory=list)
    missing_b: list[str] = field(default_factory=list)
    questions: str = ""
    #: what a reader must know to read the numbers (runs recorded at different k, ...)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        rows = self.rows
        n = len(rows)
        b_docs = sum(len(r.b) for r in rows)
        return {
            "n": n,
            "identical": sum(1 for r in rows if r.a == r.b),
            "same_documents": sum(1 for r in rows if set(r.a) == set(r.b)),
            "mean_overlap": statistics.fmean(r.overlap for r in rows) if n else None,
            "mean_rbo": statistics.fmean(r.rbo for r in rows) if n else None,
            "median_rbo": statistics.median(r.rbo for r in rows) if n else None,
            "new_in_b": sum(len(r.new_in_b) for r in rows),
            "b_documents": b_docs,
            "new_share": sum(len(r.new_in_b) for r in rows) / b_docs if b_docs else 0.0,
            "rbo_below_half": sum(1 for r in rows if r.rbo < 0.5),
            "short": sum(1 for r in rows if r.short),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "_meta": {"kind": "ragmetrics-shadow", "version": 1, "k": self.k, "rbo": {"p": self.p,
                      "variant": "RBO_ext (Webber et al. 2010, Eq. 32)"},
                      "a": {**self.a.source.to_dict(), "depth": self.a.depth},
                      "b": {**self.b.source.to_dict(), "depth": self.b.depth}, "questions": self.questions,
                      "notes": self.notes},
            "summary": self.summary(),
            "missing": {"a": self.missing_a, "b": self.missing_b},
            "per_query": [r.to_dict() for r in self.rows],
        }


def compare_sides(questions: Sequence[ShadowQuery], a: Side, b: Side, k: int, p: float = RBO_P,
                  source: str = "", notes: Sequence[str] = ()) -> ShadowReport:
    """Compare the two sides' top ``k`` on every question both rank; most changed first: by the
    lower of RBO and overlap@k (a side that returned fewer than k documents can score RBO 1 while
    sharing a few documents: its overlap says so), then RBO, overlap, most new."""
    if k < 1:
        raise RagMetricsError(f"k must be >= 1, got {k}")
    rows = []
    missing_a = [q.qid for q in questions if q.qid not in a.rankings]
    missing_b = [q.qid for q in questions if q.qid not in b.rankings]
    for q in questions:
        if q.qid not in a.rankings or q.qid not in b.rankings:
            continue
        a_all = [e.doc for e in a.rankings[q.qid]]
        top_a, top_b = a_all[:k], [e.doc for e in b.rankings[q.qid]][:k]
        returned_by_a = set(a_all)
        short = tuple(side for side, top in (("A", top_a), ("B", top_b)) if len(top) < k)
        rows.append(ShadowRow(q.qid, q.display, q.filters, top_a, top_b, overlap_at_k(top_a, top_b),
                              rbo_ext(top_a, top_b, p), [d for d in top_b if d not in returned_by_a], short))
    if not rows:
        raise RagMetricsError(f"no question is ranked by both {a.source.name!r} and {b.source.name!r}: are they "
                              "runs of the same questions?")
    rows.sort(key=lambda r: (r.changed, r.rbo, r.overlap, -len(r.new_in_b), r.qid))
    return ShadowReport(a, b, k, p, rows, missing_a, missing_b, source, list(notes))


# ------------------------------------------------------------------------------ output


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def shadow_text(report: ShadowReport, top: int = 10) -> str:
    """The summary and the ``top`` most-changed questions, for the terminal."""
    s = report.summary()
    a, b = report.a.source.name, report.b.source.name
    n = s["n"]
    lines = [
        f"Shadow: B = {b} against A = {a}, top {report.k}, {counted(n, 'question')} "
        f"(one question is 1/{n} = {1 / n:.3f} of any share).",
        "",
        markdown_table(["measure", "value"], [
            [f"mean overlap@{report.k}", fmt(s["mean_overlap"])],
            [f"mean RBO (RBO_ext, p = {report.p})", fmt(s["mean_rbo"])],
            ["median RBO", fmt(s["median_rbo"])],
            [f"share of B's top {report.k} that A never returned",
             f"{fmt(s['new_share'])} ({s['new_in_b']} of {s['b_documents']})"],
            ["questions ranked identically", f"{s['identical']} of {n}"],
            ["questions with RBO < 0.5", f"{s['rbo_below_half']} of {n}"],
            [f"questions where a side returned fewer than {report.k}", f"{s['short']} of {n}"],
        ]),
    ]
    shown = [r for r in report.rows if r.a != r.b][:top]
    if shown:
        lines += ["", f"Most changed ({len(shown)} of {sum(1 for r in report.rows if r.a != r.b)} changed), "
                      "first to label:", "",
                  markdown_table(["qid", "question", f"overlap@{report.k}", "RBO", "new in B", "short"],
                                 [[r.qid, _short(r.query), fmt(r.overlap), fmt(r.rbo),
                                   f"{len(r.new_in_b)} of {len(r.b)}", ", ".join(r.short)] for r in shown])]
    else:
        lines += ["", "Every question is ranked identically: nothing changed to label."]
    if s["short"]:
        lines.append(f"note: on {counted(s['short'], 'question')} a side returned fewer than {report.k} documents "
                     "(column short); RBO_ext extrapolates a short list, so those are ordered by the lower of RBO "
                     "and overlap@k.")
    for side, missed in ((a, report.missing_a), (b, report.missing_b)):
        if missed:
            lines.append(f"note: {side} ranks nothing for {counted(len(missed), 'question')}, not compared: "
                         f"{listed(missed)}")
    lines.extend(f"note: {note}" for note in report.notes)
    return "\n".join(lines)


def shadow_candidates(report: ShadowReport, n: int, tags: Mapping[str, tuple[str, ...]] | None = None
                      ) -> list[PooledQuery]:
    """The ``n`` most-changed questions (those ranked differently), with both sides' top-k
    documents pooled as candidates for ``ragmetrics annotate`` (rel left null)."""
    changed = [r for r in report.rows if r.a != r.b][:n]
    tags = tags or {}
    queries = [PoolQuery(r.qid, r.query, tags=tuple(tags.get(r.qid, ()))) for r in changed]
    ranked = []
    for side in (report.a, report.b):
        rankings = {r.qid: best_per_document(side.rankings[r.qid], report.k) for r in changed}
        ranked.append(Ranked(side.source, rankings))
    return pool_sources(queries, ranked, report.k)
