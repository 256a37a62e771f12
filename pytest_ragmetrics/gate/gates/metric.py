"""A metric's own gate (``recall@10``): its mean may fall by at most its tolerance against the
baseline, and may not fall under its floor.

A tolerance with nothing to hold it against checks nothing, so it fails: the reference lacks the
metric, the run lacks it (``compare``), or no query of the run is in the reference. A pooled set's
drop that the new unjudged documents explain passes here and fails the ``unjudged`` gate instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.gate.registry import GateSpec, Outcome, ThresholdKey, register

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.evidence import AggregateRow, NoAnswerRow
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["MetricGate", "limit_problems"]


def limit_problems(name: str, row: AggregateRow | NoAnswerRow, reference: str, beyond: bool, past: float | None,
                   rise: bool = False) -> list[str]:
    """What a gated row broke: moved beyond its tolerance against ``reference`` (``beyond``), and
    ``past``, the floor its value fell under (with ``rise``, where higher is worse: the ceiling it
    went over), else None."""
    problems = []
    if beyond:
        moved = f"rose {row.delta:+.4f}" if rise else f"fell {-(row.delta or 0.0):.4f}"
        problems.append(f"{name} {moved} against {reference} ({row.baseline:.4f} -> {row.now_common:.4f}); "
                        f"allowed {'rise' if rise else 'drop'} {row.tolerance:g}")
    if past is not None:
        problems.append(f"{name} = {row.now:.4f} is {'above its ceiling' if rise else 'under its floor'} {past:g}")
    return problems


@register
class MetricGate(GateSpec):
    kind = "metric"
    keys = (ThresholdKey("<metric>_tolerance", "number in [0, 1)", "allowed drop of the metric's mean against the "
                         "baseline (default 0 for recall@k, or for the first metric when no metric is gated)"),
            ThresholdKey("<metric>_min", "number in [0, 1]", "floor for the metric's mean over the run"))
    summary = ("one per metric with a `_tolerance` or `_min`: fails on a drop beyond the tolerance or a mean under "
               "the floor")

    def names(self, plan: GatePlan) -> list[str]:
        t = plan.thresholds
        lacking = [m for m in sorted(plan.lacking) if m not in plan.metrics
                   and (m in t.tolerance or m in t.minimum or m in t.query_tolerance)]
        return [m for m in plan.metrics if m in t.tolerance or m in t.minimum] + lacking

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        reference = inputs.reference
        if name in inputs.lacking:
            return Outcome(name, False, f"{name} cannot be compared: {inputs.lacking[name]}, so {reference}'s gate on "
                                        f"it checks nothing; measure the run with {name}, or gate with thresholds "
                                        f"that do not name {name}", kind=self.kind, metric=name, strict=True)
        row = next(r for r in verdict.aggregate if r.metric == name)
        has_baseline = inputs.baseline is not None
        problems = limit_problems(name, row, reference, row.dropped_too_far, row.minimum if row.under_floor else None)
        limit = row.tolerance if row.tolerance is not None else row.minimum

        def outcome(passed: bool, message: str, strict: bool = False) -> Outcome:
            queries = [r.qid for r, _ in verdict.movers(name)] if not passed else []
            return Outcome(name, passed, message, kind=self.kind, metric=name, before=row.baseline,
                           after=row.now_common if has_baseline else row.now, limit=limit, queries=queries,
                           strict=strict)

        if row.tolerance is not None and row.delta is None and has_baseline:
            compared = {m for q in inputs.baseline.per_query.values()  # type: ignore[union-attr]
                        for m in q if not m.startswith("_")}
            if name not in compared:
                problems.append(f"{name} cannot be compared: {reference} holds no {name} (it measured "
                                f"{', '.join(sorted(compared)) or 'no metric'}), so its allowed drop checks "
                                f"nothing; re-measure {reference} with {name}, or remove {name}_tolerance")
            else:
                problems.append(f"{name} cannot be compared: no query of this run is in {reference}, so its "
                                "allowed drop checks nothing")
        if problems and name in verdict.rescued and not row.under_floor and len(problems) == 1:
            upper_base, upper = verdict.rescued[name]
            return outcome(True, f"{name} fell {-(row.delta or 0.0):.4f} against {reference} ({row.baseline:.4f} -> "
                                 f"{row.now_common:.4f}), but not beyond its allowed drop {row.tolerance:g} if the new "
                                 f"unjudged documents are relevant ({upper_base:.4f} -> {upper:.4f}): see gate "
                                 "unjudged")
        if problems:  # a gate that compared nothing is no regression report: it fails in report-only mode too
            return outcome(False, "; ".join(problems), strict=any("cannot be compared" in p for p in problems))
        if row.delta is None and row.minimum is None:
            return outcome(True, f"{name}: nothing to compare with")
        return outcome(True, f"{name} within tolerance")
