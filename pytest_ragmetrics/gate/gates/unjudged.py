"""The ``unjudged`` gate of a pooled golden set: it fails while a drop waits on documents nobody
judged (an ``inconclusive`` query, or a mean that falls beyond its tolerance only if the new
unjudged documents are not relevant), and names the command that writes them out for judging."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from pytest_ragmetrics.errors import listed
from pytest_ragmetrics.gate.registry import GateSpec, Outcome, register

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.evidence import Regression
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["UnjudgedGate", "unjudged_message", "fix_command"]


def fix_command(artifact_path: str | None, golden: str | None = None) -> str:
    """The one command that writes a run's unjudged documents out for ``ragmetrics annotate``; with the
    ``golden`` set the run used (relative to the current directory when inside it), so that the command
    does not depend on finding the artifact's recorded one."""
    if artifact_path:
        named = ""
        if golden:
            path = Path(golden)
            try:
                path = path.resolve().relative_to(Path.cwd().resolve()) if path.is_absolute() else path
            except ValueError:
                pass
            named = f" --golden {shlex.quote(path.as_posix())}"
        return (f"write them out for annotation with `ragmetrics pool --run {artifact_path} --unjudged-only "
                f"-o unjudged.jsonl{named}`")
    return ("write them out for annotation with `ragmetrics pool --run run.json --unjudged-only -o unjudged.jsonl` "
            "(rerun with --rag-report=run.json to write the run artifact it reads)")


def unjudged_message(inconclusive: Sequence[Regression], pairs: Sequence[tuple[str, str]],
                     artifact_path: str | None, golden: str | None = None) -> str:
    """Why the gate fails: the documents to judge, the queries waiting on them, and the command."""
    n = len(pairs)
    one = len(inconclusive) == 1
    who = (f"{len(inconclusive)} {'query is' if one else 'queries are'} inconclusive "
           f"({listed([r.qid for r in inconclusive])}): {'it' if one else 'they'} fell beyond tolerance, but not if "
           f"{'its' if one else 'their'} unjudged documents are relevant") if inconclusive else \
        "an aggregate drop is inconclusive: it is beyond tolerance, but not if the unjudged documents are relevant"
    return (f"judge {'this 1 document' if n == 1 else f'these {n} documents'}: {who}, so this is neither a "
            f"regression nor a pass; {fix_command(artifact_path, golden)}")


@register
class UnjudgedGate(GateSpec):
    kind = "unjudged"
    summary = ("pooled golden sets: fails while a drop could be explained by documents nobody judged "
               "(the run is `inconclusive`), naming them")

    def names(self, plan: GatePlan) -> list[str]:
        return [self.kind] if plan.pooled else []

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:
        pairs = verdict.to_judge
        if not pairs:
            return Outcome(name, True, "no drop waits on unjudged documents", kind=self.kind)
        return Outcome(name, False, unjudged_message(verdict.inconclusive, pairs, inputs.artifact_path,
                                                     str(inputs.golden.source or "") or None),
                       kind=self.kind, queries=list(dict.fromkeys(q for q, _ in pairs)))
