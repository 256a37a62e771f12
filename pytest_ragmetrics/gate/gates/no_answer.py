"""The ``false_retrieval_rate`` gate: questions marked answerable: false may not get answers more
often than the baseline allows, nor above a ceiling (higher is worse)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.gate.gates.metric import limit_problems
from pytest_ragmetrics.gate.registry import GateSpec, Outcome, ThresholdKey, register
from pytest_ragmetrics.unanswerable import RATE

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["NoAnswerGate"]


@register
class NoAnswerGate(GateSpec):
    kind = RATE
    keys = (ThresholdKey("false_retrieval_rate_tolerance", "number in [0, 1)",
                         "allowed rise of the false-retrieval rate of the questions marked answerable: false"),
            ThresholdKey("false_retrieval_rate_max", "number in [0, 1]", "ceiling on that rate"))
    summary = "with a `false_retrieval_rate_*` key: fails when unanswerable questions get answers too often"

    def names(self, plan: GatePlan) -> list[str]:
        t = plan.thresholds
        gated = t.false_retrieval_rate_tolerance is not None or t.false_retrieval_rate_max is not None
        return [self.kind] if gated else []

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        row, reference = verdict.no_answer, inputs.reference
        if row is None:
            return Outcome(name, True, f"{RATE}: no question marked answerable: false ran", kind=self.kind,
                           metric=RATE)
        problems = limit_problems(RATE, row, reference, row.rose_too_far, row.maximum if row.over_max else None,
                                  rise=True)
        if row.tolerance is not None and inputs.baseline is not None and row.n_common == 0:
            problems.append(f"{RATE} cannot be compared: no unanswerable question of this run is in {reference}, "
                            "so its allowed rise checks nothing; refresh the baseline to record them")
        limit = row.tolerance if row.tolerance is not None else row.maximum
        passed = not problems
        return Outcome(name, passed, "; ".join(problems) or f"{RATE} within tolerance", kind=self.kind, metric=RATE,
                       before=row.baseline, after=row.now_common if inputs.baseline is not None else row.now,
                       limit=limit, queries=[] if passed else list(row.retrieved))
