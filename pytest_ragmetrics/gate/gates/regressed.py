"""The ``regressed-queries`` gate: how many queries may regress at all, errors included."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.gate.registry import GateSpec, Outcome, ThresholdKey, register

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["RegressedQueriesGate"]


@register
class RegressedQueriesGate(GateSpec):
    kind = "regressed-queries"
    keys = (ThresholdKey("max_regressed_queries", "integer >= 0, or null (default: no cap)",
                         "how many queries may regress (fall beyond a per-query tolerance, or error)"),
            ThresholdKey("<metric>_query_tolerance", "number in [0, 1)",
                         "allowed drop of one query (default 0 for recall@k, or for the first metric when no "
                         "metric is gated); a query beyond it fails its own item"))
    summary = "with `max_regressed_queries`: fails when more queries regressed (errors included)"

    def names(self, plan: GatePlan) -> list[str]:
        return [self.kind] if plan.thresholds.max_regressed_queries is not None else []

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        count, limit = len(verdict.regressions), inputs.thresholds.max_regressed_queries or 0
        return Outcome(name, count <= limit,
                       f"{count} {'query' if count == 1 else 'queries'} regressed (errors included); "
                       f"at most {limit} allowed", kind=self.kind, after=float(count), limit=float(limit),
                       queries=[r.qid for r in verdict.regressions])
