"""What a run writes: its metadata, the JSON run artifact, the HTML report, the
Markdown summary, and the leakage warning of the terminal summary.

Only the process that judges (a serial run, the xdist controller) calls these.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ragmetrics.errors import RagMetricsError, listed
from pytest_ragmetrics.files import atomic_write_json, atomic_write_text, git_commit, write_problem
from pytest_ragmetrics.gate.artifact import build_artifact, seal_artifact
from pytest_ragmetrics.gate.baseline import load_baseline, measurement_dict

if TYPE_CHECKING:
    from pytest_ragmetrics._plugin.session import RagSession

__all__ = ["meta", "artifact", "baseline_entry", "baseline_retriever", "write_artifact", "write_html",
           "append_markdown", "leakage_warning", "shard_section"]


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
        # what each record's scope was checked against: an independent source, or the results' own metadata
        **({"scope_check": {"source": check.source, "detail": check.detail}}
           if (check := rag.scope_check()).source != "none" else {}),
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
    """The run's artifact (unsealed), built once by :func:`pytest_ragmetrics.gate.artifact.build_artifact`
    for both the JSON file and the HTML report."""
    if rag.artifact_data is None:
        from pytest_ragmetrics.report.text import retriever_changes

        comparing = rag.baseline is not None and not rag.options.update_baseline
        rag.artifact_data = build_artifact(
            meta(rag), rag.judge.verdict(), rag.golden, rag.records, rag.metrics, rag.options.k, rag.options.subset,
            rag.baseline if comparing else None, rag.baseline_id, baseline_entry(rag), baseline_retriever(rag),
            retriever_changes(baseline_retriever(rag), rag.retriever_description), rag.full_golden.judgments_from)
        run = rag.artifact_data["_meta"]
        if rag.options.run_id is not None:  # which run: `ragmetrics merge` refuses a shard of another
            run["run_id"] = rag.options.run_id
        if rag.options.attempt is not None:  # which attempt of it: `ragmetrics merge` names a retried shard
            run["attempt"] = rag.options.attempt
        if rag.options.subset == "smoke":  # which smoke subset: shards of different rules do not merge
            from pytest_ragmetrics.gate.shard import queries_digest

            run["smoke"] = {"rule": rag.options.smoke_rule,
                            "queries": queries_digest(q.qid for q in rag.sharded_set)}
        if rag.options.shard is not None:
            rag.artifact_data["shard"] = shard_section(rag)
    return rag.artifact_data


def shard_section(rag: RagSession) -> dict[str, Any]:
    """What ``ragmetrics merge`` needs of a shard beyond its per-query entries: which shard of how many,
    the queries it was dealt, the baseline's path, the gold check, and each query's full record (its
    comparison with the baseline, its explanations), so the merged verdict is the one a whole run gives."""
    index, count = rag.options.shard  # type: ignore[misc]
    gold: dict[str, Any] = {"from_retriever": rag._gold_from_retriever}
    if rag.gold_check is not None:
        gold["check"] = rag.gold_check.to_dict()
    elif rag.gold_unchecked is not None:
        gold["unchecked"] = rag.gold_unchecked
    return {"index": index, "count": count, "of": len(rag.sharded_set), "queries": [q.qid for q in rag.golden],
            "baseline": _project_path(rag, rag.options.baseline), "gold": gold,
            "records": {q.qid: rag.records[q.qid].to_dict() for q in rag.golden if q.qid in rag.records},
            # compared with a baseline measured differently (--rag-accept-mismatch): the merged report says so
            **({"mismatch": list(rag.mismatch)} if rag.mismatch else {})}


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
        data = artifact(rag)
        atomic_write_json(path, seal_artifact({**data, "_meta": dict(data["_meta"])}))  # the HTML's copy stays unsealed
    except OSError as exc:
        raise RagMetricsError(f"cannot write the run report {path}: {write_problem(path, exc)}") from None


def write_html(rag: RagSession, path: Path) -> None:
    """Write the self-contained HTML report of the run artifact, atomically."""
    from pytest_ragmetrics.report.html import render_html

    data = artifact(rag)
    data = {**data, "_meta": {**data["_meta"], "worst_n": rag.worst_n}}
    try:
        texts = rag.judge.document_texts() if rag.judge.verdict().inconclusive else None
        atomic_write_text(path, render_html(data, texts=texts))
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
            fh.write(verdict_markdown(rag.judge.verdict(), rag.worst_n,
                                      retriever_changes=retriever_changes(baseline_retriever(rag),
                                                                          rag.retriever_description),
                                      pooled=rag.judge.pooled_markdown() if rag.pooled else None,
                                      lowerings=rag.judge.lowerings_summary(markdown=True)) + "\n")
    except OSError as exc:
        raise RagMetricsError(f"cannot append the Markdown summary to {path}: {write_problem(path, exc)}") from None
