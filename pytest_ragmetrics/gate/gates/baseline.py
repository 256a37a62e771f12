"""The ``baseline`` gate: there is a baseline, and the run is whole against it.

A partial run (``-k``, ``--deselect``, a skip, a run stopped early) cannot pass for the whole set
however good its part looks; a query the baseline holds that is gone from the golden set, or that
the baseline scored and this run cannot, would drop out of every mean without a word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.gate.registry import GateSpec, Outcome, register
from pytest_ragmetrics.gate.skipped import skipped_text

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["BaselineGate"]


def _queries(n: int) -> str:
    return f"{n} {'query' if n == 1 else 'queries'}"


@register
class BaselineGate(GateSpec):
    kind = "baseline"
    strict = True
    summary = ("always: fails without a baseline, on a partial run (queries deselected, skipped or not run), and "
               "when a baselined query is gone from the golden set or can no longer be scored")

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        reference = inputs.reference
        where = f" at {inputs.baseline_path}" if inputs.baseline_path else ""
        unmet = [] if inputs.baseline is not None else [
            f"no baseline{where} to compare with; create it with `pytest --rag-eval --rag-update-baseline`"]
        skipped = {q: inputs.skipped[q] for q in verdict.not_run if q in inputs.skipped}
        not_run = [q for q in verdict.not_run if q not in inputs.skipped]
        if skipped:
            unmet.append(skipped_text(skipped, len(inputs.golden)))
        if not_run:
            n = len(not_run)
            unmet.append(f"partial run: {_queries(n)} meant to run did not "
                         f"({', '.join(not_run[:5])}{' …' if n > 5 else ''}; deselected with -k, --deselect or --lf, "
                         "or the run stopped early); the gate judges the whole set, so run it unfiltered")
        if verdict.removed:
            n = len(verdict.removed)
            unmet.append(f"{_queries(n)} of {reference} {'is' if n == 1 else 'are'} gone from the golden set "
                         f"({listed(list(verdict.removed))}): a query removed (or whose judgments were dropped) is "
                         "no longer checked, so its removal must show in the baseline's diff: refresh the baseline "
                         "in the same change")
        if verdict.unscored:
            n = len(verdict.unscored)
            why = [f"{q} ({reason})" if reason else q for q, reason in verdict.unscored.items()]
            unmet.append(f"{_queries(n)} that {reference} scored cannot be scored now: {listed(why)}. A gold "
                         "document gone from the corpus (removed, renamed, or missing from doc_ids()) hides any "
                         "regression of its query: restore it or fix the golden set; or, if it is gone on "
                         "purpose, refresh the baseline with --rag-allow-missing-gold in the same change")
        queries = [*verdict.not_run, *verdict.removed, *verdict.unscored]
        return Outcome(name, not unmet, "; ".join(unmet) or "baseline found", kind=self.kind, queries=queries)
