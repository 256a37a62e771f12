"""The ``leak`` gate of a golden set with a ``scope`` on any record: a returned document outside
its query's scope fails it, whatever the thresholds say and in report-only mode too.

Scope is only as good as the metadata it is checked against. Checked against an independent source
(the corpus given with ``--rag-corpus``, or the retriever's ``doc_metadata()``) a leak cannot hide;
checked only against the metadata the retriever returned with its results, a layer that drops the
filters and copies them into every result passes. The header says which; with
``require_independent_scope`` the latter fails this gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.gate.registry import GateSpec, Outcome, ThresholdKey, register

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["LEAK_GATE", "LeakGate"]

#: The gate a scoped golden set adds.
LEAK_GATE = "leak"


@register
class LeakGate(GateSpec):
    kind = LEAK_GATE
    strict = True
    keys = (ThresholdKey("require_independent_scope", "true or false (default false)",
                         "true: fail when scope was checked only against the metadata the retriever returned "
                         "(give --rag-corpus, or a doc_metadata() method)"),)
    summary = "golden sets with a `scope` on a record: fails on any returned document outside its query's scope"

    def names(self, plan: GatePlan) -> list[str]:
        return [self.kind] if plan.scoped else []

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        leaks = verdict.leaks
        problems = []
        if leaks:
            n = sum(len(leak.docs) for leak in leaks)
            named = [f"{leak.qid} ({', '.join(d['doc'] for d in leak.docs)})" for leak in leaks]
            from pytest_ragmetrics.errors import listed

            problems.append(f"{n} returned {'document is' if n == 1 else 'documents are'} outside their query's "
                            f"scope in {len(leaks)} {'query' if len(leaks) == 1 else 'queries'}: {listed(named)}; no "
                            "threshold allows a leak")
        scope = inputs.scope
        if inputs.thresholds.require_independent_scope and not scope.independent:
            problems.append("scope was checked only against the metadata the retriever returned with its results, "
                            "which a layer that drops the filters and copies them into every result would pass; "
                            "require_independent_scope is true: give --rag-corpus (the corpus with each document's "
                            "metadata), or a doc_metadata() method on the retriever")
        if problems:
            return Outcome(name, False, "; ".join(problems), kind=self.kind, strict=True,
                           queries=[leak.qid for leak in leaks])
        return Outcome(name, True, "no returned document is outside its query's scope", kind=self.kind, strict=True)
