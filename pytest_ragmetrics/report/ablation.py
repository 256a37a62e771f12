"""An ablation as people read it: the table, the notes under it, the questions that moved, JSON.

The notes say what a reader must know before comparing rows (what one question
is worth, skipped rows, capped rankings) and, where a setting would change the
picture, name it as the ablation's ``spelling`` says: the library's parameter
names, or the flags of the command that ran it.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from pytest_ragmetrics.measures import MeasurementConfig, parse_measure
from pytest_ragmetrics.report.tables import markdown_table, sample_size_note
from pytest_ragmetrics.report.text import retriever_warnings

__all__ = ["ablation_breakdown", "ablation_dict", "ablation_notes", "ablation_table", "render_json", "render_markdown"]


class _Setting(Protocol):
    """What the notes read of a row's setting (``pytest_ragmetrics.tools.ablate.Setting``)."""

    @property
    def top_k(self) -> int: ...
    @property
    def fetch_k(self) -> int: ...
    @property
    def unique_docs(self) -> bool | None: ...
    @property
    def base_mode(self) -> str: ...
    @property
    def reranks(self) -> bool: ...


class _Row(Protocol):
    """One measured setting, as rendered (``pytest_ragmetrics.tools.ablate.Row``)."""

    @property
    def setting(self) -> _Setting: ...
    @property
    def label(self) -> str: ...
    @property
    def n(self) -> int: ...
    @property
    def aggregate(self) -> dict[str, float]: ...
    @property
    def per_query(self) -> dict[str, dict[str, float]]: ...
    @property
    def unscorable(self) -> list[str]: ...
    @property
    def short(self) -> dict[str, int]: ...
    @property
    def depth(self) -> int | None: ...
    @property
    def skipped(self) -> str | None: ...
    @property
    def chunks(self) -> int | None: ...
    @property
    def retriever(self) -> Any: ...
    def to_dict(self) -> dict[str, Any]: ...


class Ablation(Protocol):
    """A table of rows that differ in one parameter (``pytest_ragmetrics.tools.ablate.Ablation``:
    the tools build it, this module only reads it)."""

    @property
    def parameter(self) -> str: ...
    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def rows(self) -> Sequence[_Row]: ...
    @property
    def measured(self) -> Sequence[_Row]: ...
    @property
    def n(self) -> int: ...
    @property
    def questions(self) -> dict[str, str]: ...
    @property
    def tags(self) -> dict[str, tuple[str, ...]]: ...
    @property
    def config(self) -> MeasurementConfig | None: ...
    @property
    def title(self) -> str: ...
    @property
    def spelling(self) -> Mapping[str, str]: ...
    @property
    def no_answer(self) -> list[str]: ...
    def differing(self, column: str | None = None) -> list[tuple[str, dict[str, float]]]: ...


def _follows_top_k(column: str) -> bool:
    return column.endswith("@k")


def ablation_table(ab: Ablation, digits: int = 4) -> str:
    """One row per measured setting, one column per metric (and the chunk count in a chunking sweep)."""
    headers = [ab.parameter, *ab.columns]
    with_chunks = ab.parameter == "chunk_size"
    if with_chunks:
        headers.insert(1, "chunks")
    body = []
    for r in ab.measured:
        agg = r.aggregate
        cells: list[object] = [r.label, *(agg.get(c) for c in ab.columns)]
        if with_chunks:
            cells.insert(1, f"{r.chunks:,}" if r.chunks is not None else None)
        body.append(cells)
    return markdown_table(headers, body, digits)


def ablation_notes(ab: Ablation) -> list[str]:
    """What a reader must know to read the table: n and 1/n, skipped rows, capped rankings."""
    out = [sample_size_note(ab.n)]
    for message in retriever_warnings(r.retriever for r in ab.measured):
        out.append(f"Retriever: {message}")
    for r in ab.rows:
        if r.skipped is not None:
            out.append(f"{r.label}: skipped, {r.skipped}.")
    cut_columns = [c for c in ab.columns if not _follows_top_k(c)]
    for r in ab.measured:
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
                why.append(f"chunks of one document count once; {ab.spelling['unique_docs']} fills the ranking "
                           "with distinct documents")
            hint = f" ({'; '.join(why)})" if why else ""
            out.append(
                f"{r.label}: {len(r.short)} of {r.n} queries came back with fewer than {r.depth} "
                f"distinct documents (fewest {fewest}), so metrics at that depth are capped{hint}."
            )
    raised = [r for r in ab.measured
              if r.setting.fetch_k < r.setting.top_k and (r.setting.base_mode == "hybrid" or r.setting.reranks)]
    if raised:
        labels = ", ".join(r.label for r in raised)
        out.append(
            f"{labels}: fetch_k is below top_k, and the stack then takes top_k candidates from each "
            f"route, so these rows measure fetch_k = top_k."
        )
    unscorable = next((r.unscorable for r in ab.measured if r.unscorable), [])
    if unscorable:
        level = ab.config.relevance_level if ab.config else 1
        out.append(
            f"{len(unscorable)} questions have no relevant document at level {level} and are not "
            f"scored (never counted as 0), e.g. {unscorable[0]!r}."
        )
    if ab.no_answer:
        out.append(f"{len(ab.no_answer)} questions marked answerable: false are left out (they have no recall, MRR "
                   f"or nDCG; the gate scores them by false retrieval), e.g. {ab.no_answer[0]!r}.")
    if any(_follows_top_k(c) for c in ab.columns) and len({r.setting.top_k for r in ab.measured}) > 1:
        out.append("@k columns are cut at each row's top_k; nDCG@k is not comparable across different k.")
    return out


def ablation_breakdown(ab: Ablation, column: str | None = None, width: int = 72, limit: int | None = None) -> str:
    """The questions that moved, as a Markdown table (plus a count, and counts per tag)."""
    column = column or ab.columns[0]
    moved = ab.differing(column)
    rows = ab.measured
    if len(rows) < 2:
        return f"Per-query breakdown ({column}): needs two measured rows."
    n = ab.n
    lines = [
        f"{len(moved)} of {n} questions score differently across rows on {column}; "
        f"the other {n - len(moved)} score the same in every row."
    ]
    tag_names = sorted({t for q in ab.questions for t in ab.tags.get(q, ())})
    if moved and tag_names:
        moved_ids = {qid for qid, _ in moved}
        scored = rows[0].per_query
        parts = []
        for tag in tag_names:
            total = sum(1 for q in scored if tag in ab.tags.get(q, ()))
            hit = sum(1 for q in moved_ids if tag in ab.tags.get(q, ()))
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
        text = " ".join(ab.questions.get(qid, "").split())
        if len(text) > width:
            text = text[: width - 1].rstrip() + "…"
        cells: list[object] = [qid, text, *(values[r.label] for r in rows)]  # markdown_table escapes
        if tag_names:
            cells.insert(2, ",".join(ab.tags.get(qid, ())))
        body.append(cells)
    lines.append("")
    lines.append(markdown_table(headers, body))
    if len(shown) < len(moved):
        lines.append(f"({len(moved) - len(shown)} more; JSON output lists every query.)")
    return "\n".join(lines)


def ablation_dict(ab: Ablation, breakdown_column: str | None = None) -> dict[str, Any]:
    """One table as JSON: its rows with every query, its notes, and the queries that moved."""
    column = breakdown_column or ab.columns[0]
    return {
        "parameter": ab.parameter,
        "title": ab.title,
        "columns": list(ab.columns),
        "n": ab.n,
        "one_over_n": (1 / ab.n) if ab.n else None,
        "notes": ablation_notes(ab),
        "rows": [r.to_dict() for r in ab.rows],
        "no_answer": ab.no_answer,
        "differing": {
            "column": column,
            "queries": [{"qid": q, "values": v} for q, v in ab.differing(column)],
        },
    }


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
        out.append(ablation_table(ab))
        out.append("")
        out.extend(ablation_notes(ab))
        if len(ab.measured) >= 2:
            out.append("")
            col = column if column in ab.columns else ab.columns[0]
            if breakdown:
                out.append(f"### Questions that moved ({col})")
                out.append("")
                out.append(ablation_breakdown(ab, col, limit=limit))
            else:
                moved = len(ab.differing(col))
                out.append(
                    f"{moved} of {ab.n} questions score differently across rows on {col} "
                    f"({ab.spelling['breakdown']} lists them)."
                )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_json(ablations: Sequence[Ablation], extra: Mapping[str, Any] | None = None,
                column: str | None = None) -> dict[str, Any]:
    """``extra`` (e.g. what was compared), the measurement config, and every table."""
    config = next((ab.config for ab in ablations if ab.config is not None), None)
    payload: dict[str, Any] = dict(extra or {})
    payload["config"] = config.to_dict() if config else None
    payload["tables"] = [ablation_dict(ab, column if column in ab.columns else None) for ab in ablations]
    return payload
