"""The ``significant-drops`` gate: a metric no tolerance gates still fails when it fell beyond chance
(paired p-value under :data:`~pytest_ragmetrics.gate.evidence.SIGNIFICANT_P`) and by more than one
query's worth (1/n)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.gate.evidence import SIGNIFICANT_P
from pytest_ragmetrics.gate.registry import GateSpec, Outcome, ThresholdKey, register

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["SignificantDropsGate"]


@register
class SignificantDropsGate(GateSpec):
    kind = "significant-drops"
    keys = (ThresholdKey("fail_on_significant_drop", "true or false (default true)",
                         "false: a clear drop of an ungated metric is only reported"),)
    summary = ("when a measured metric has no tolerance (unless `fail_on_significant_drop` is false): "
               f"fails when one fell beyond chance (p < {SIGNIFICANT_P:g}) and by more than 1/n")

    def names(self, plan: GatePlan) -> list[str]:
        t = plan.thresholds
        # a floor is no change gate: a metric with only a floor is still judged here
        if t.fail_on_significant_drop and any(m not in t.tolerance for m in plan.metrics):
            return [self.kind]
        return []

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        reference = inputs.reference
        fell = [r for r in verdict.aggregate if r.tolerance is None and r.significant_drop]
        message = "; ".join(
            f"{r.metric} fell {-r.delta:.4f} against {reference} ({r.baseline:.4f} -> {r.now_common:.4f}, "  # type: ignore[operator]
            f"p={r.stats.p_value:.4f} < {SIGNIFICANT_P:g}, more than 1/n = {1 / r.stats.n:.4f})"  # type: ignore[union-attr]
            for r in fell)
        if fell:
            them = "it" if len(fell) == 1 else "them"
            message += (f". No threshold gates {them}, but a drop this clear is not chance: gate {them} in "
                        "thresholds.json (" + ", ".join(f"{r.metric}_tolerance" for r in fell) + "), or set "
                        "\"fail_on_significant_drop\": false to only report such drops")
        first = fell[0] if len(fell) == 1 else None
        return Outcome(name, not fell, message or f"no ungated metric fell beyond chance (p < {SIGNIFICANT_P:g}) and "
                                                  "by more than 1/n", kind=self.kind,
                       metric=first.metric if first else None, before=first.baseline if first else None,
                       after=first.now_common if first else None, limit=SIGNIFICANT_P,
                       queries=sorted({r.qid for m in fell for r, _ in verdict.movers(m.metric)}))
