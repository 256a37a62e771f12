"""Choosing the smoke subset: by tag, or a seeded sample stratified by tag.

``rag_smoke`` spells the rule: ``tag:smoke`` (queries carrying that tag) or
``sample:N`` / ``sample:N:SEED`` (N queries drawn with a fixed seed,
proportionally from each stratum, a stratum being a query's first tag). The
same golden set and rule always give the same subset, on every machine.
"""

from __future__ import annotations

import random

from ._errors import InputError
from ._golden import GoldenSet

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
        if not size_text.isdigit() or int(size_text) < 1 or (seed_text and not seed_text.lstrip("-").isdigit()):
            raise InputError(None, None, f"rag_smoke = {rule!r}: write sample:N or sample:N:SEED with integers")
        return golden.subset(_stratified(golden, int(size_text), int(seed_text or 0)))
    raise InputError(None, None, f"rag_smoke = {rule!r}: expected tag:NAME, sample:N or sample:N:SEED")


def _stratified(golden: GoldenSet, size: int, seed: int) -> list[str]:
    strata: dict[str, list[str]] = {}
    for q in golden:
        strata.setdefault(q.tags[0] if q.tags else "", []).append(q.qid)
    total = len(golden)
    if size >= total:
        return [q.qid for q in golden]
    # Largest-remainder allocation, every non-empty stratum gets at least one when size allows.
    quotas = {name: size * len(ids) / total for name, ids in strata.items()}
    counts = {name: int(q) for name, q in quotas.items()}
    by_remainder = sorted(strata, key=lambda n: (-(quotas[n] - counts[n]), n))
    for name in by_remainder[: size - sum(counts.values())]:
        counts[name] += 1
    rng = random.Random(seed)
    chosen: list[str] = []
    for name in sorted(strata):
        ids = sorted(strata[name])
        chosen.extend(rng.sample(ids, min(counts[name], len(ids))))
    return chosen
