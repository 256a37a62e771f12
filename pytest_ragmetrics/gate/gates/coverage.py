"""The ``coverage`` gate, and the statement of what a run judged.

A question of the golden set that carries labels but has no baseline entry is never compared:
however far it falls, no per-query tolerance and no mean judges it. A baseline refreshed on part of
the set, questions added in the change that breaks them, or a question left out once, would all
pass in silence. So such a question fails this gate, named, until the baseline is refreshed
(``max_ungated_queries`` in thresholds.json allows a number of them, in words a reviewer sees).

A question whose kind changed since the baseline (answerable and unanswerable, or a set whose
judgments went from closed to pooled or back) is a golden-set edit: its baseline entry was measured
as another kind of question, so it fails here until the baseline is refreshed, whatever
``--rag-accept-mismatch`` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.gate.registry import GateSpec, Outcome, ThresholdKey, register
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["CoverageGate", "Coverage", "coverage_of", "REFRESH"]

REFRESH = "`pytest --rag-eval --rag-update-baseline`"


@dataclass
class Coverage:
    """What a run's hard gates judged, and what they did not, with why."""

    #: queries compared with their baseline entry
    judged: int = 0
    #: metrics a tolerance or floor gates (the means; per query, those with a query tolerance)
    gated_metrics: list[str] = field(default_factory=list)
    per_query_metrics: list[str] = field(default_factory=list)
    #: metrics measured and shown, gated only by significant-drops (or not at all)
    ungated_metrics: list[str] = field(default_factory=list)
    #: whether significant-drops judges the ungated metrics
    significant: bool = True
    #: labelled questions with no baseline entry
    uncovered: list[str] = field(default_factory=list)
    #: of those, questions the baseline was allowed to leave out (gold not in the corpus)
    allowed: list[str] = field(default_factory=list)
    #: question -> how its kind changed since the baseline
    changed_kind: dict[str, str] = field(default_factory=dict)
    #: the golden set's kind changed as a whole (closed <-> pooled), or None
    set_kind: str | None = None
    #: the baseline was measured on another version of the golden set: its recorded source and digest
    other_set: str | None = None
    #: queries that ran but could not be judged, with why (skipped, unscorable, ...)
    unjudged: dict[str, str] = field(default_factory=dict)
    #: how messages name what the run is compared with ("the baseline", or "A")
    reference: str = "the baseline"
    #: what the records' scopes were checked against, in words, and whether that source is independent
    scope: str | None = None
    scope_independent: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"judged": self.judged, "gated_metrics": self.gated_metrics,
                "per_query_metrics": self.per_query_metrics, "ungated_metrics": self.ungated_metrics,
                "uncovered": self.uncovered, "allowed": self.allowed, "changed_kind": self.changed_kind,
                "set_kind": self.set_kind, "other_set": self.other_set, "unjudged": self.unjudged,
                "reference": self.reference,
                **({"scope": self.scope, "scope_independent": self.scope_independent} if self.scope else {})}

    def lines(self) -> list[str]:
        """The summary's statement of coverage: what a hard gate judged, and what ran ungated and why."""
        reference = self.reference
        per_query = ", ".join(self.per_query_metrics) or "no metric"
        means = ", ".join(self.gated_metrics) or "no metric"
        out = [f"Judged: {self.judged} {'query' if self.judged == 1 else 'queries'} against {reference}; per query "
               f"{per_query}; means {means} (a tolerance or floor)"]
        if self.ungated_metrics:
            out.append(f"Without a tolerance or floor: {', '.join(self.ungated_metrics)} ("
                       + ("shown; a clear drop fails significant-drops)" if self.significant else
                          "shown only: fail_on_significant_drop is false)"))
        if self.uncovered:
            out.append(f"Not judged, no entry in {reference}: {listed(self.uncovered)}")
        if self.allowed:
            out.append(f"Not judged, left out of {reference} with --rag-allow-missing-gold: {listed(self.allowed)}")
        if self.changed_kind:
            out.append("Not judged, kind changed since " + reference + ": "
                       + listed([f"{q} ({how})" for q, how in self.changed_kind.items()]))
        if self.scope:
            out.append(f"Scope checked against {self.scope}" + ("" if self.scope_independent else
                       ": not an independent source (give --rag-corpus, or a doc_metadata() method on the "
                       "retriever; require_independent_scope in thresholds.json fails such a run)"))
        for qid, why in list(self.unjudged.items())[:10]:
            out.append(f"Not judged: {qid} ({why})")
        if len(self.unjudged) > 10:
            out.append(f"… and {len(self.unjudged) - 10} more not judged")
        return out


def _allowed_qids(meta: Any) -> set[str]:
    allowed = meta.get("allowed_missing_gold") if isinstance(meta, dict) else None
    if not isinstance(allowed, list):
        return set()
    return {str(item).split("/", 1)[0] for item in allowed if isinstance(item, str)}


def coverage_of(inputs: RunInputs, verdict: Verdict) -> Coverage:
    """What the run judged and what it did not (see :class:`Coverage`)."""
    thresholds = inputs.thresholds
    metrics = list(inputs.metrics)
    cov = Coverage(
        gated_metrics=[m for m in metrics if m in thresholds.tolerance or m in thresholds.minimum],
        per_query_metrics=[m for m in metrics if m in thresholds.query_tolerance],
        ungated_metrics=[m for m in metrics if m not in thresholds.tolerance and m not in thresholds.minimum
                         and m not in thresholds.query_tolerance],
        judged=verdict.n_common,
        significant=thresholds.fail_on_significant_drop,
        reference=inputs.reference,
    )
    if inputs.scope.source != "none":
        cov.scope, cov.scope_independent = inputs.scope.detail or inputs.scope.source, inputs.scope.independent
    baseline = inputs.baseline
    for qid in verdict.unscorable:
        cov.unjudged[qid] = "cannot be scored: no relevant document it can find"
    for qid, why in inputs.skipped.items():
        cov.unjudged[qid] = f"skipped: {why}" if why else "skipped"
    if baseline is None:
        return cov
    level = inputs.relevance_level
    old_of = {new: old for old, new in verdict.renamed.items()}  # renamed: {baseline id: id now}
    allowed = _allowed_qids(baseline.meta)
    measured = baseline.meta.get("measurement") if isinstance(baseline.meta, dict) else None
    then = measured.get("judgments", "closed") if isinstance(measured, dict) else "closed"
    now = inputs.full_golden.judgments
    if then != now:
        cov.set_kind = f"the golden set is judged {now}, but {inputs.reference} was measured with it {then}"
    golden_meta = baseline.meta.get("golden") if isinstance(baseline.meta, dict) else None
    if isinstance(golden_meta, dict) and isinstance(golden_meta.get("sha256"), str) \
            and golden_meta["sha256"] != inputs.full_golden.fingerprint():
        source = golden_meta.get("source")
        cov.other_set = (f"{inputs.reference} was measured on another version of the golden set"
                         + (f" ({source}, sha256 {golden_meta['sha256'][:12]}…)" if source else
                            f" (sha256 {golden_meta['sha256'][:12]}…)"))
    for q in inputs.full_golden:
        record = inputs.records.get(q.qid)
        # labelled: a relevant judgment, or marked answerable: false; a run read back without its golden
        # set (``compare``) knows it from the record: a scored query had a relevant document
        labelled = not q.answerable or q.n_relevant(level) > 0 or \
            (record is not None and record.status in ("scored", "unanswerable"))
        entry = baseline.per_query.get(old_of.get(q.qid, q.qid))
        if entry is None:
            if not labelled:
                continue
            if q.qid in allowed and (record is None or record.status == "unscorable"):
                cov.allowed.append(q.qid)
            else:
                cov.uncovered.append(q.qid)
            continue
        was_unanswerable = FALSE_RETRIEVAL in entry
        has_metrics = any(not k.startswith("_") and k != FALSE_RETRIEVAL for k in entry)
        if q.answerable and was_unanswerable and not has_metrics:
            cov.changed_kind[q.qid] = "was answerable: false, now answerable"
        elif not q.answerable and has_metrics and not was_unanswerable:
            cov.changed_kind[q.qid] = "now answerable: false"
    return cov


@register
class CoverageGate(GateSpec):
    kind = "coverage"
    strict = True
    keys = (ThresholdKey("max_ungated_queries", "integer >= 0 (default 0)",
                         "labelled questions of the golden set allowed to have no baseline entry"),)
    summary = ("always: fails when labelled questions of the golden set have no baseline entry (beyond "
               "max_ungated_queries) or changed kind since the baseline")

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        cov = verdict.coverage
        reference = inputs.reference
        if inputs.baseline is None or cov is None:
            return Outcome(name, False, "no query is covered: there is no baseline to compare with (see gate "
                                        "baseline)", kind=self.kind)
        problems = []
        limit = inputs.thresholds.max_ungated_queries
        if len(cov.uncovered) > limit:
            n = len(cov.uncovered)
            problems.append(
                f"{n} labelled {'question' if n == 1 else 'questions'} of the golden set {'has' if n == 1 else 'have'} "
                f"no entry in {reference}, so no gate judges {'it' if n == 1 else 'them'}: {listed(cov.uncovered)}; "
                + (f"refresh the baseline ({REFRESH}) in the same change" if reference == "the baseline" else
                   f"compare runs of the same questions (measure {reference} with {'it' if n == 1 else 'them'})")
                + (f" (max_ungated_queries allows {limit})" if limit else
                   ", or allow some with max_ungated_queries in thresholds.json")
                + (f"; {outside} of them {'is' if outside == 1 else 'are'} not in this run's subset: the baseline "
                   "covers the whole golden set" if (outside := sum(q not in inputs.golden for q in cov.uncovered))
                   else ""))
        if cov.set_kind:
            problems.append(f"{cov.set_kind}: every baseline entry was measured as another kind of question; "
                            f"refresh the baseline ({REFRESH})")
        if cov.changed_kind:
            n = len(cov.changed_kind)
            problems.append(f"{n} {'question' if n == 1 else 'questions'} changed kind since {reference} ("
                            + listed([f"{q}: {how}" for q, how in cov.changed_kind.items()])
                            + f"); {'its' if n == 1 else 'their'} entry measured another kind of question, so "
                            f"{'it is' if n == 1 else 'they are'} not judged: refresh the baseline ({REFRESH}); "
                            "--rag-accept-mismatch does not allow this")
        answerable = sum(1 for q in inputs.golden if q.answerable and q.qid in inputs.records)
        if cov.judged == 0 and answerable and verdict.n:
            problems.append(f"no query of this run could be compared with {reference}: none of its entries holds a "
                            f"metric this run measures ({', '.join(inputs.metrics)}), so nothing was judged; "
                            f"refresh the baseline ({REFRESH})")
        if problems and cov.other_set:
            problems.append(cov.other_set)
        queries = [*cov.uncovered, *cov.changed_kind]
        if problems:
            return Outcome(name, False, "; ".join(problems), kind=self.kind, queries=queries,
                           before=None, after=float(len(cov.uncovered)), limit=float(limit))
        note = f"every labelled question of the golden set has an entry in {reference}"
        if cov.uncovered:
            note = (f"{len(cov.uncovered)} labelled questions have no entry in {reference} "
                    f"({listed(cov.uncovered)}), within max_ungated_queries {limit}")
        if cov.allowed:
            note += f"; {len(cov.allowed)} left out with --rag-allow-missing-gold ({listed(cov.allowed)})"
        return Outcome(name, True, note, kind=self.kind, queries=queries, after=float(len(cov.uncovered)),
                       limit=float(limit))
