"""The ``stale-labels`` gate: under ``fail_on_stale_labels``, a label older than its age limit (or
without a date) fails the run instead of warning (see :mod:`pytest_ragmetrics.gate.staleness`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.gate.registry import GateSpec, Outcome, ThresholdKey, register
from pytest_ragmetrics.gate.staleness import GATE

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["StaleLabelsGate"]


@register
class StaleLabelsGate(GateSpec):
    kind = GATE
    keys = (ThresholdKey("max_label_age_days", "whole number of days >= 1", "how long every label stays fresh"),
            ThresholdKey("tag:<tag>/max_label_age_days", "whole number of days >= 1",
                         "how long the labels of records with that tag stay fresh"),
            ThresholdKey("fail_on_stale_labels", "true or false (default false)",
                         "true: stale or undated labels fail this gate instead of warning"))
    summary = "with `fail_on_stale_labels`: fails on labels older than their age limit, or undated"

    def names(self, plan: GatePlan) -> list[str]:
        return [self.kind] if plan.thresholds.fail_on_stale_labels else []

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        labels = inputs.labels
        if labels is None:  # the limits are set, so the labels must have been aged: fail rather than pass unseen
            return Outcome(name, False, "the labels' ages are not known for this run, so fail_on_stale_labels "
                                        "cannot be checked", kind=self.kind)
        problem = labels.problem()
        queries = [r.qid for r in [*labels.stale, *labels.undated]]
        return Outcome(name, problem is None,
                       problem or f"no label is older than its limit ({labels.limits_text()}), none undated",
                       kind=self.kind, queries=queries if problem else [])
