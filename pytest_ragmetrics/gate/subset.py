"""Choosing the smoke subset: by tag, or a seeded sample stratified by tag.

``rag_smoke`` spells the rule: ``tag:smoke`` (queries carrying that tag) or
``sample:N`` / ``sample:N:SEED`` (N queries drawn with a fixed seed from the
strata, a stratum being a query's first tag). When N is at least the number of
strata, every stratum gets one query and the rest of N is shared out in
proportion to each stratum's remaining size, so a rare kind of question is
never left out. When N is smaller than the number of strata, the N largest
strata give one query each (ties broken by tag name) and the others none. The same golden
set and rule always give the same subset, on every machine.
"""

from __future__ import annotations

import random

from pytest_ragmetrics.errors import InputError
from pytest_ragmetrics.golden import GoldenSet

__all__ = ["select_smoke"]


def select_smoke(golden: GoldenSet, rule: str) -> GoldenSet:
    rule = rule.strip()
    kind, _, rest = rule.partition(":")
    if kind == "tag" and rest:
        chosen = golden.subset([q.qid for q in golden if rest in q.tags])
        if not len(chosen):
            raise InputError(golden.source, None, f"rag_smoke = {rule!r}: no query carries the tag {rest!r}")
        return chosen
    if kind == "sample" and rest:
        size_text, _, seed_text = rest.partition(":")
        # isdecimal(), as for metric cutoffs: isdigit() accepts '²', which int() then rejects
        if not size_text.isdecimal() or int(size_text) < 1 \
                or (seed_text and not seed_text.removeprefix("-").isdecimal()):
            raise InputError(None, None, f"rag_smoke = {rule!r}: write sample:N or sample:N:SEED with a whole number N "
                                         ">= 1 and an integer SEED")
        return golden.subset(_stratified(golden, int(size_text), int(seed_text or 0)))
    raise InputError(None, None, f"rag_smoke = {rule!r}: expected tag:NAME, sample:N or sample:N:SEED")


def _stratified(golden: GoldenSet, size: int, seed: int) -> list[str]:
    strata: dict[str, list[str]] = {}
    for q in golden:
        strata.setdefault(q.tags[0] if q.tags else "", []).append(q.qid)
    total = len(golden)
    if size >= total:
        return [q.qid for q in golden]
    rng = random.Random(seed)
    counts = _allocate({name: len(ids) for name, ids in strata.items()}, size)
    chosen: list[str] = []
    for name in sorted(strata):
        ids = sorted(strata[name])
        chosen.extend(rng.sample(ids, min(counts[name], len(ids))))
    return chosen


def _allocate(sizes: dict[str, int], size: int) -> dict[str, int]:
    """How many queries each stratum gives to a sample of ``size`` (< the total).

    With at least as many places as strata: one per stratum, then the rest by
    largest remainder in proportion to what each stratum has left (so none gives
    more than it holds). With fewer: the ``size`` largest strata one each.
    """
    if size < len(sizes):
        largest = sorted(sizes, key=lambda n: (-sizes[n], n))[:size]
        return {name: int(name in largest) for name in sizes}
    left = {name: n - 1 for name, n in sizes.items()}
    spare, pool = size - len(sizes), sum(left.values())
    quotas = {name: spare * n / pool for name, n in left.items()}
    counts = {name: 1 + int(q) for name, q in quotas.items()}
    by_remainder = sorted(sizes, key=lambda n: (-(quotas[n] - int(quotas[n])), n))
    for name in by_remainder[: size - sum(counts.values())]:
        counts[name] += 1
    return counts
