"""What a run writes: its metadata, the JSON run artifact, the HTML report, the
Markdown summary, and the leakage warning of the terminal summary.

Only the process that judges (a serial run, the xdist controller) calls these.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ragmetrics.errors import RagMetricsError, listed
from pytest_ragmetrics.gate.artifact import ARTIFACT_FORMAT, seal_artifact
from pytest_ragmetrics.gate.baseline import load_baseline, measurement_dict
from pytest_ragmetrics.files import atomic_write_json, atomic_write_text, git_commit, write_problem

if TYPE_CHECKING:
    from pytest_ragmetrics._plugin.session import RagSession

__all__ = ["meta", "artifact", "baseline_entry", "baseline_retriever", "write_artifact", "write_html",
           "append_markdown", "leakage_warning"]


def meta(rag: RagSession) -> dict[str, Any]:
    """What was measured, on what, by whom and when: the fingerprint a comparison checks."""
    from pytest_ragmetrics import __version__

    source = _project_path(rag, rag.options.golden)
    return {
        "golden": {"source": source, "sha256": rag.full_golden.fingerprint(),
                   "n_queries": len(rag.full_golden)},
        "measurement": measurement_dict(rag.config, rag.full_golden.judgments),
        "k": rag.options.k,
        "retriever": rag.retriever_description,
        "package_version": __version__,
        "git_commit": git_commit(rag.rootdir),
        # what the run was gated with, so `ragmetrics compare` can judge it the same way later
        "thresholds": {"source": _project_path(rag, Path(rag.thresholds.path)) if rag.thresholds.path else "defaults",
                       "values": rag.thresholds.to_dict()},
        "created": rag.created,
        # the score a result needs to count as an answer to a question marked answerable: false
        **({"answer_threshold": rag.options.answer_threshold}
           if rag.options.answer_threshold is not None or rag.full_golden.unanswerable() else {}),
    }


def _project_path(rag: RagSession, path: Path) -> str:
    """``path`` relative to the project root when it is inside it: committed files must not carry one
    machine's absolute paths."""
    try:
        return Path(path).resolve().relative_to(rag.rootdir.resolve()).as_posix()
    except ValueError:
        return str(path)


def artifact(rag: RagSession) -> dict[str, Any]:
    """The JSON run artifact: config, per-query results, aggregates, comparison; its schema
    (``_meta.format``) is :mod:`pytest_ragmetrics.gate.artifact`'s, which every reader checks."""
    from pytest_ragmetrics.report.text import retriever_changes

    verdict = rag.verdict()
    per_query = {}
    for q in rag.golden:
        r = rag.records.get(q.qid)
        if r is None:
            continue
        per_query[q.qid] = {"status": r.status, "metrics": r.metrics, "ranking": r.ranking,
                            "tags": list(q.tags), "error": r.error, "n_docs": r.n_docs,
                            "_judgments": q.judgments_digest()}  # lets `ragmetrics compare` spot changed labels
        if r.parent_level is not None:
            per_query[q.qid]["parent_level"] = r.parent_level
        per_query[q.qid]["_top"] = list(r.ranking)  # the top k, as the baseline records it
        if rag.pooled and r.judged is not None:
            per_query[q.qid]["unjudged"] = unjudged_entry(rag, r, verdict)
        if r.scores:
            per_query[q.qid]["scores"] = r.scores
        if not q.answerable:
            per_query[q.qid]["answerable"] = False
            if r.status == "unanswerable":
                per_query[q.qid]["false_retrieval"] = r.false_retrieval
        entry = rag.baseline_id.get(q.qid, q.qid)  # a renamed query's baseline is its old entry
        if rag.baseline is not None and entry in rag.baseline.per_query and not rag.options.update_baseline:
            # the metrics this run measured (a baseline compared despite other metrics holds others)
            per_query[q.qid]["baseline"] = {m: v for m, v in rag.baseline.metrics_of(entry).items()
                                            if m in rag.metrics or m == "false_retrieval"}
    data = meta(rag)
    data["format"] = ARTIFACT_FORMAT
    data["subset"] = rag.options.subset
    data["baseline"] = baseline_entry(rag)
    data["baseline_retriever"] = baseline_retriever(rag)
    data["judgments"] = {"mode": rag.full_golden.judgments, "from": rag.full_golden.judgments_from}
    comparison = verdict.to_dict()
    # the usual cause of a red run the morning after: kept where reviewers read, not only in the log
    comparison["retriever_changes"] = retriever_changes(data["baseline_retriever"], rag.retriever_description)
    return {
        "_meta": data,
        "aggregate": {row.metric: row.now for row in verdict.aggregate},
        "n": verdict.n,
        "per_query": per_query,
        "comparison": comparison,
    }


def unjudged_entry(rag: RagSession, r: Any, verdict: Any) -> dict[str, Any]:
    """A pooled query's judged@k, unjudged documents (and the new ones), bounds and verdict."""
    k = rag.options.k
    return {f"judged@{k}": r.judged, "docs": list(r.unjudged),
            "new": None if r.unjudged_new is None else list(r.unjudged_new),
            f"unjudged_new@{k}": None if r.unjudged_new is None else len(r.unjudged_new),
            "upper": r.upper, "inconclusive": any(i.qid == r.qid for i in verdict.inconclusive)}


def baseline_retriever(rag: RagSession) -> Any:
    """The baseline's ``_meta.retriever`` (the one a refresh replaces), or None without a baseline."""
    return rag.baseline.meta.get("retriever") if rag.baseline is not None else None


def baseline_entry(rag: RagSession) -> dict[str, Any] | None:
    """Which baseline file this run was judged against (or wrote): the sha256 of its bytes,
    the digest of its numbers (``content``, :meth:`Baseline.content_digest`) and its
    ``_meta.created``, so ``ragmetrics history`` can tell when the baseline was refreshed: by
    its content and time, never by its bytes (a trailing newline or a reseal is no refresh).

    ``updated`` is true for a ``--rag-update-baseline`` run, which compares with
    nothing and names the file it wrote; ``None`` when there was no baseline (or
    the update was refused and nothing was compared).
    """
    if rag.options.update_baseline:
        if rag.baseline_written is None:
            return None
        created: Any = rag.created
    elif rag.baseline is not None:
        created = rag.baseline.meta.get("created")
    else:
        return None
    try:
        sha256: str | None = hashlib.sha256(Path(rag.options.baseline).read_bytes()).hexdigest()
    except OSError:
        sha256 = None
    try:  # the file as written or judged against, not the in-memory copy (renames, upgrades)
        content: str | None = load_baseline(rag.options.baseline, sealed=False).content_digest()
    except RagMetricsError:
        content = None
    return {"sha256": sha256, "content": content, "created": created, "updated": bool(rag.options.update_baseline)}


def write_artifact(rag: RagSession, path: Path) -> None:
    """Write the run artifact atomically; an unwritable path is a :class:`RagMetricsError`."""
    try:
        atomic_write_json(path, seal_artifact(artifact(rag)))
    except OSError as exc:
        raise RagMetricsError(f"cannot write the run report {path}: {write_problem(path, exc)}") from None


def write_html(rag: RagSession, path: Path) -> None:
    """Write the self-contained HTML report of the run artifact, atomically."""
    from pytest_ragmetrics.report.html import render_html

    data = artifact(rag)
    data["_meta"]["worst_n"] = rag.worst_n
    try:
        atomic_write_text(path, render_html(data, texts=rag.document_texts() if rag.verdict().inconclusive else None))
    except OSError as exc:
        raise RagMetricsError(f"cannot write the HTML report {path}: {write_problem(path, exc)}") from None


def leakage_warning(rag: RagSession) -> str | None:
    """Golden questions found (near-)verbatim in ``rag_corpus``: numbers that look too
    good usually mean the questions themselves are in the index."""
    if rag.options.corpus is None:
        return None
    from pytest_ragmetrics.tools.leakage import check_leakage

    try:
        report = check_leakage(rag.golden, rag.options.corpus)
    except RagMetricsError as exc:
        return f"Leakage check skipped: {exc}"
    leaked = report.leaked_qids
    if not leaked:
        return None
    best: dict[str, Any] = {}
    for leak in report.leaks:
        if leak.qid not in best or leak.overlap > best[leak.qid].overlap:
            best[leak.qid] = leak
    shown = listed([f"{q} ({best[q].doc_id}, {best[q].kind} {best[q].overlap:.2f})" for q in leaked])
    return (f"WARNING: {len(leaked)} of {report.n_questions} golden questions appear verbatim or nearly so in "
            f"the corpus {rag.options.corpus}: {shown}. Scores on them "
            f"measure copying, not retrieval; `ragmetrics leakage` lists every match.")


def append_markdown(rag: RagSession, path: Path) -> None:
    """Append the Markdown verdict (``$GITHUB_STEP_SUMMARY`` is appended to, never replaced)."""
    from pytest_ragmetrics.report.markdown import verdict_markdown
    from pytest_ragmetrics.report.text import retriever_changes

    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(verdict_markdown(rag.verdict(), rag.worst_n,
                                      retriever_changes=retriever_changes(baseline_retriever(rag),
                                                                          rag.retriever_description),
                                      pooled=rag.pooled_markdown() if rag.pooled else None) + "\n")
    except OSError as exc:
        raise RagMetricsError(f"cannot append the Markdown summary to {path}: {write_problem(path, exc)}") from None
