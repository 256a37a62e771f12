"""The ``baseline-lowered`` gate: the baseline in use may not be lower than the one at a git ref
(``--rag-baseline-ref``, or a pull request's base branch) unless a reason recorded since that ref
carries the lowering (see :mod:`pytest_ragmetrics.gate.lowering`).

The seal catches accidents; it is a digest anyone can recompute. This gate, and review, catch a
baseline lowered on purpose and resealed: every lowering must leave a written reason in the diff.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.gate.lowering import LOWERED_GATE, gated_in_files, gated_metrics
from pytest_ragmetrics.gate.registry import GateSpec, Outcome, register

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["BaselineLoweredGate"]


@register
class BaselineLoweredGate(GateSpec):
    kind = LOWERED_GATE
    strict = True
    summary = ("with `--rag-baseline-ref` (or on a pull request whose base branch is fetched): fails on a gated "
               "value lower than at that ref that no reason recorded since carries")

    def names(self, plan: GatePlan) -> list[str]:
        return [self.kind] if plan.ratchet else []

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        ratchet = inputs.ratchet
        if ratchet is None or ratchet.ref is None:  # planned, so it must judge: nothing to compare is no pass
            return Outcome(name, False, "the baseline at the base ref is not known for this run, so no lowering "
                                        "can be told", kind=self.kind)
        # what the thresholds in force gate, and what the baseline at the ref was gated with: loosening
        # thresholds.json in the change that lowers the baseline does not hide the lowering
        gated = gated_metrics(inputs.thresholds, inputs.metrics) | (
            gated_in_files(ratchet.at_ref.meta) if ratchet.at_ref is not None else frozenset())
        outcome = ratchet.judge(inputs.baseline, gated, ratchet.shown or inputs.baseline_path or "")
        return Outcome(name, outcome.passed, outcome.message, kind=self.kind,
                       queries=sorted({low.qid for low in outcome.unexplained if low.qid}))
