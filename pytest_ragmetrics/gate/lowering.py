"""A lowered baseline leaves a written trace: what went down, why, when and who said so.

A baseline may go down on purpose (a smaller model, a cheaper index: a trade-off someone
chose), but a reviewer must see it. Three places check it, all through this module:

- a refresh (``pytest --rag-eval --rag-update-baseline``) that would lower a gated value
  against the baseline it replaces writes nothing unless ``--rag-reason`` says why
  (:func:`refresh_lowerings`);
- ``ragmetrics baseline --reseal`` compares the file with its committed version and seals a
  lowering only with ``--reason`` (:func:`find_lowerings`, :func:`unexplained`);
- the ratchet (``--rag-baseline-ref REF``) compares the baseline in use with the one at a git
  ref: a lowering that no entry recorded since REF carries fails gate ``baseline-lowered``
  (:func:`judge_lowerings`, :func:`ratchet_base`).

The reasons are kept in the file, ``_meta.lowerings`` (sealed with the rest of ``_meta``;
:mod:`pytest_ragmetrics.gate.baseline` checks its schema), oldest first, each::

    {"reason": "...", "lowered": [{"qid": "q-002", "metric": "recall@10", "before": 1.0, "after": 0.5},
                                  {"aggregate": true, "metric": "recall@10", "before": 1.0, "after": 0.9}],
     "time": "2026-12-03T10:00:00+00:00", "author": "Ann <ann@example.com>"}

``after`` is null for a query whose entry is gone (removed from the golden set, or no longer
scorable); ``author`` is absent when unknown.

What is gated comes from the thresholds (:func:`gated_metrics`): per query, the metrics with a
``<metric>_query_tolerance`` (every ``recall@k`` by default) and ``false_retrieval`` (a question
marked answerable: false that now gets an answer); for the means, the metrics with a
``<metric>_tolerance`` or ``<metric>_min``, and ``false_retrieval_rate`` (a rise is the lowering).
A change smaller than :data:`NOISE` is rounding, not a lowering.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from pytest_ragmetrics.errors import BaselineError, RagMetricsError, ThresholdsError, shown
from pytest_ragmetrics.gate.baseline import FALSE_RETRIEVAL, RATE, Baseline, round_metric
from pytest_ragmetrics.gate.thresholds import Thresholds, recorded_thresholds
from pytest_ragmetrics.measures import MeasurementConfig

__all__ = [
    "AGGREGATE",
    "LOWERED_GATE",
    "NOISE",
    "REASON_COMMAND",
    "Lowering",
    "LoweringEntry",
    "LoweredOutcome",
    "RefreshLowerings",
    "carried",
    "entries_since",
    "find_lowerings",
    "gated_in_files",
    "gated_metrics",
    "judge_lowerings",
    "listed_lowerings",
    "new_entry",
    "recorded_lowerings",
    "refresh_lowerings",
    "unexplained",
    "utc_now",
]

#: The gate that fails on a lowering without a recorded reason (``--rag-baseline-ref``).
LOWERED_GATE = "baseline-lowered"
#: A change smaller than this is rounding (baselines keep 10 decimals), not a lowering.
NOISE = 1e-9
#: In :func:`gated_metrics`, a gated mean is named ``aggregate.<metric>``; a bare name is gated per query.
AGGREGATE = "aggregate."
#: ... and ``significant.<metric>`` a mean the significant-drops gate judges: lowered when it fell as
#: that gate would fail it (beyond chance, and by more than one query's worth).
SIGNIFICANT = "significant."
#: How a lowering gets its reason recorded.
REASON_COMMAND = 'pytest --rag-eval --rag-update-baseline --rag-reason "why it went down"'
#: Higher is worse for these: their "lowering" is a rise.
_RISING = frozenset({FALSE_RETRIEVAL, RATE})
#: At most this many lowered values are named in one line of a message (all are in the file).
_SHOWN = 20


def gated_metrics(thresholds: Thresholds, metrics: Sequence[str]) -> frozenset[str]:
    """The values a lowering of which needs a reason: the names of the metrics gated per query,
    ``aggregate.<metric>`` for each mean a tolerance or floor gates (:data:`AGGREGATE`), and
    ``significant.<metric>`` for each of ``metrics`` the significant-drops gate judges instead
    (:data:`SIGNIFICANT`): whatever a gate would fail, a refresh may not write down without a reason."""
    per_query = {*thresholds.query_tolerance, FALSE_RETRIEVAL}
    means = {*thresholds.tolerance, *thresholds.minimum, RATE}
    significant = {m for m in metrics if m not in thresholds.tolerance and thresholds.fail_on_significant_drop}
    return frozenset(per_query | {AGGREGATE + m for m in means} | {SIGNIFICANT + m for m in significant})


def gated_in_files(*metas: Mapping[str, Any]) -> frozenset[str]:
    """What the thresholds recorded in these baselines' ``_meta`` gate, together (the built-in
    defaults of each one's measurement when it records none, or none that can be read): for
    ``ragmetrics baseline --reseal``, which has no thresholds file of its own to go by."""
    gated: set[str] = set()
    for meta in metas:
        try:
            config = MeasurementConfig.from_dict(meta["measurement"])
        except (KeyError, TypeError, ValueError, RagMetricsError):
            continue
        try:
            thresholds = recorded_thresholds(dict(meta), config, "the baseline")
        except ThresholdsError:
            thresholds = None
        gated |= gated_metrics(thresholds or Thresholds.defaults(config), config.metric_names)
    return frozenset(gated) or frozenset({FALSE_RETRIEVAL, AGGREGATE + RATE})


# --------------------------------------------------------------------------- what went down


@dataclass(frozen=True)
class Lowering:
    """One gated value that went down (for ``false_retrieval`` and its rate: up)."""

    metric: str
    before: float
    #: None: the query's entry is gone (removed from the golden set, or no longer scorable)
    after: float | None
    #: the query (its id now, when it was renamed); None: the mean
    qid: str | None = None
    #: the query's id before it was renamed (same text and judgments), for messages only
    was: str | None = None

    def text(self) -> str:
        """``q-002 recall@10 1.0000 -> 0.5000``, ``mean recall@10 …``, ``q-006 removed from the baseline
        (recall@10 was 1.0000)`` (gone from the golden set, or no longer scorable)."""
        where = "mean" if self.qid is None else shown(self.qid) + (f" (was {shown(self.was)})" if self.was else "")
        if self.after is None:
            return f"{where} removed from the baseline ({self.metric} was {_value(self.before)})"
        return f"{where} {self.metric} {_value(self.before)} -> {_value(self.after)}"

    def to_record(self) -> dict[str, Any]:
        """As ``_meta.lowerings[i].lowered[j]`` holds it."""
        where: dict[str, Any] = {"aggregate": True} if self.qid is None else {"qid": self.qid}
        return {**where, "metric": self.metric, "before": round_metric(self.before),
                "after": None if self.after is None else round_metric(self.after)}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Lowering:
        after = data.get("after")
        return cls(str(data["metric"]), float(data["before"]), None if after is None else float(after),
                   None if data.get("aggregate") else str(data["qid"]))


def _value(value: float) -> str:
    return f"{value:.4f}"


def _worse(metric: str, before: float, after: float) -> bool:
    before, after = round_metric(before), round_metric(after)
    return (after - before if metric in _RISING else before - after) >= NOISE


def _values(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if not k.startswith("_")}


def _renames(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Old id -> new id of queries renamed with the same text and judgments (their ``_judgments``
    digest), when exactly one entry left and one arrived with it."""
    gone: dict[Any, list[str]] = {}
    for qid, entry in before.items():
        if qid not in after and isinstance(entry.get("_judgments"), str):
            gone.setdefault(entry["_judgments"], []).append(qid)
    arrived: dict[Any, list[str]] = {}
    for qid, entry in after.items():
        if qid not in before and entry.get("_judgments") in gone:
            arrived.setdefault(entry["_judgments"], []).append(qid)
    return {gone[d][0]: new[0] for d, new in arrived.items() if len(new) == 1 and len(gone[d]) == 1}


def find_lowerings(before: Baseline, after: Baseline, gated: Iterable[str]) -> list[Lowering]:
    """Every gated value of ``before`` that ``after`` holds lower (a rise for ``false_retrieval`` and its
    rate), and every query of ``before`` holding a gated value that ``after`` no longer has (removed);
    per query in id order, then the means, each over the queries both files hold (as the gate compares
    a run with its baseline). ``gated`` as :func:`gated_metrics` names them."""
    gated = frozenset(gated)
    renamed = _renames(before.per_query, after.per_query)
    found = []
    for qid in sorted(before.per_query):
        old = _values(before.per_query[qid])
        new_id = qid if qid in after.per_query else renamed.get(qid)
        if new_id is None:
            found += [Lowering(m, float(old[m]), None, qid) for m in sorted(old) if m in gated]
            continue
        new = _values(after.per_query[new_id])
        # a gated value gone from its entry (the question relabelled answerable: false, say) went down too
        found += [Lowering(m, float(old[m]), None if m not in new else float(new[m]), new_id,
                           qid if new_id != qid else None)
                  for m in sorted(old) if m in gated and (m not in new or _worse(m, old[m], new[m]))]
    # a mean is compared over the queries both hold: questions added (or removed, listed above) change the
    # mean without any query getting worse, and adding a hard question is no lowering
    pairs = {qid: qid if qid in after.per_query else renamed.get(qid) for qid in before.per_query}
    for metric in sorted(before.aggregate):
        if AGGREGATE + metric not in gated or metric not in after.aggregate:
            continue
        key = FALSE_RETRIEVAL if metric == RATE else metric
        both = [(float(before.per_query[q][key]), float(after.per_query[n][key])) for q, n in pairs.items()
                if n is not None and isinstance(before.per_query[q].get(key), (int, float))
                and isinstance(after.per_query[n].get(key), (int, float))]
        if not both:
            continue
        b, a = sum(x for x, _ in both) / len(both), sum(y for _, y in both) / len(both)
        if _worse(metric, b, a):
            found.append(Lowering(metric, b, a))
    for metric in sorted(m[len(SIGNIFICANT):] for m in gated if m.startswith(SIGNIFICANT)):
        if AGGREGATE + metric in gated:
            continue  # judged by its tolerance above
        both = [(float(before.per_query[q][metric]), float(after.per_query[n][metric])) for q, n in pairs.items()
                if n is not None and isinstance(before.per_query[q].get(metric), (int, float))
                and isinstance(after.per_query[n].get(metric), (int, float))]
        if both and _significant_fall([y - x for x, y in both]):
            found.append(Lowering(metric, sum(x for x, _ in both) / len(both), sum(y for _, y in both) / len(both)))
    return found


def _significant_fall(deltas: list[float]) -> bool:
    """Whether a mean fell as the significant-drops gate fails it: by more than 1/n, and beyond chance."""
    from pytest_ragmetrics.evaluation import drop_beyond_one_query
    from pytest_ragmetrics.gate.evidence import SIGNIFICANT_P

    deltas = [0.0 if abs(d) < NOISE else d for d in deltas]
    if not drop_beyond_one_query(sum(deltas) / len(deltas), len(deltas)):
        return False
    from pytest_ragmetrics.stats import delta_stats

    return delta_stats(deltas).p_value < SIGNIFICANT_P


# ------------------------------------------------------------------------ the recorded reasons


@dataclass(frozen=True)
class LoweringEntry:
    """One entry of ``_meta.lowerings``: a refresh or reseal that lowered the baseline, and why."""

    reason: str
    lowered: tuple[Lowering, ...]
    time: str
    author: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoweringEntry:
        return cls(str(data["reason"]), tuple(Lowering.from_record(x) for x in data["lowered"]), str(data["time"]),
                   data.get("author"))


def recorded_lowerings(meta: Mapping[str, Any]) -> list[LoweringEntry]:
    """The entries of a loaded (schema-checked) baseline's ``_meta.lowerings``, oldest first."""
    entries = meta.get("lowerings")
    return [LoweringEntry.from_dict(e) for e in entries] if isinstance(entries, list) else []


def new_entry(reason: str, lowered: Sequence[Lowering], time: str, author: str | None) -> dict[str, Any]:
    """A ``_meta.lowerings`` entry, as the file holds it."""
    return {"reason": reason, "lowered": [x.to_record() for x in lowered], "time": time,
            **({"author": author} if author else {})}


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def history_kept(then: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """Whether ``now``'s ``_meta.lowerings`` begins with ``then``'s, unchanged: the reasons are a history
    that only grows; an entry removed, reordered or rewritten (its time moved, say) is not a new reason."""
    def key(entry: Any) -> str:
        return json.dumps(entry, sort_keys=True)

    old, new = list(then.get("lowerings") or []), list(now.get("lowerings") or [])
    return [key(e) for e in new[:len(old)]] == [key(e) for e in old]


def entries_since(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[LoweringEntry]:
    """The entries ``now``'s ``_meta.lowerings`` added after ``then``'s; none when the history was not
    kept (:func:`history_kept`): an edited old entry must not pass for a reason recorded since."""
    if not history_kept(then, now):
        return []
    return [LoweringEntry.from_dict(e) for e in list(now.get("lowerings") or [])[len(then.get("lowerings") or []):]]


def carried(lowering: Lowering, entries: Iterable[LoweringEntry]) -> bool:
    """Whether a recorded entry explains ``lowering``: it names the same query (or the mean) and metric,
    and the value it lowered to is no higher than the value now (no lower, for a rate that rose). A later
    refresh that went back up part of the way stays explained; one that went lower still is not. An entry
    that recorded the query's removal explains whatever the query holds after it."""
    for entry in entries:
        for x in entry.lowered:
            if x.qid != lowering.qid or x.metric != lowering.metric:
                continue
            if x.after is None and x.qid is not None:
                return True
            if lowering.after is None or x.after is None:
                continue
            if not _worse(x.metric, x.after, lowering.after):  # now no worse than it was lowered to
                return True
    return False


def unexplained(lowered: Iterable[Lowering], entries: Iterable[LoweringEntry]) -> list[Lowering]:
    entries = list(entries)
    return [x for x in lowered if not carried(x, entries)]


def listed_lowerings(lowered: Sequence[Lowering], indent: str = "  - ") -> str:
    """One line a lowered value (at most :data:`_SHOWN`, then how many more)."""
    lines = [indent + x.text() for x in lowered[:_SHOWN]]
    if len(lowered) > _SHOWN:
        lines.append(f"{indent}… and {len(lowered) - _SHOWN} more")
    return "\n".join(lines)


def _counted(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


# ----------------------------------------------------------------------------- a refresh

@dataclass(frozen=True)
class RefreshLowerings:
    """What a refresh lowers and what it writes in ``_meta.lowerings``."""

    lowered: list[Lowering]
    #: the new file's ``_meta.lowerings`` (the old entries carried over, and this refresh's); empty: no key
    entries: list[dict[str, Any]]
    #: lines for the refresh's summary
    notes: list[str]


def refresh_lowerings(old: Baseline | None, new: Baseline, gated: Iterable[str], reason: str | None, *,
                      time: str, author: str | None, path: str, reason_flag: str = "--rag-reason") -> RefreshLowerings:
    """Check a refresh against the baseline it replaces (``old``; None when there was none, or it
    could not be read). A refresh that lowers a gated value raises :class:`BaselineError` listing what
    it lowers, unless ``reason`` (``reason_flag`` names the option) says why: then the reason is
    recorded, after the entries of older refreshes."""
    carried_over = list(old.meta.get("lowerings") or []) if old is not None else []
    lowered = find_lowerings(old, new, gated) if old is not None else []
    notes = []
    if lowered and reason is None:
        raise BaselineError(
            f"not writing {path}: this refresh lowers {_counted(len(lowered), 'gated value', 'gated values')} "
            f"against the baseline it replaces:\n{listed_lowerings(lowered)}\n"
            "A baseline only goes down with a written reason, kept in the file (_meta.lowerings) where a reviewer "
            f"sees it: if this trade-off is meant, run the refresh again with {reason_flag} \"why it went down\"; "
            "otherwise fix the retrieval first. Nothing was written.")
    if lowered:
        carried_over.append(new_entry(reason or "", lowered, time, author))
        notes.append(f"Lowered on purpose, recorded in _meta.lowerings (entry {len(carried_over)}): "
                     f"\"{shown(reason or '')}\"" + (f" by {shown(author)}" if author else "")
                     + f"\n{listed_lowerings(lowered)}")
    elif reason is not None:
        why = "this refresh lowers no gated value" if old is not None else "there is no previous baseline to lower"
        notes.append(f"{reason_flag} was not needed: {why}, so the reason was not recorded.")
    return RefreshLowerings(lowered, carried_over, notes)


# ----------------------------------------------------------------------------- the ratchet

@dataclass(frozen=True)
class LoweredOutcome:
    """Gate ``baseline-lowered``: whether it passed, why, and the lowerings no recorded reason carries."""

    passed: bool
    message: str
    unexplained: tuple[Lowering, ...] = ()


def judge_lowerings(at_ref: Baseline | None, current: Baseline | None, gated: Iterable[str], ref: str,
                    path: str = "the baseline") -> LoweredOutcome:
    """The ratchet: every gated value of ``current`` lower than in ``at_ref`` (the baseline at git
    ``ref``; None when the file did not exist there) must be carried by a ``_meta.lowerings`` entry
    recorded since ``ref`` (:func:`carried`)."""
    if current is None:
        return LoweredOutcome(True, f"no baseline at {path} to compare with {ref}")
    if at_ref is None:
        return LoweredOutcome(True, f"{path} is new at {ref}: nothing there to compare with")
    if not history_kept(at_ref.meta, current.meta):
        n = len(at_ref.meta.get("lowerings") or [])
        return LoweredOutcome(False, f"the {n} reason{'' if n == 1 else 's'} recorded in _meta.lowerings at {ref} "
                                     f"{'was' if n == 1 else 'were'} removed, reordered or rewritten in {path}: the "
                                     "reasons are the baseline's history and only grow; restore them as they are at "
                                     f"{ref} (git show {ref}:{path})")
    lowered = find_lowerings(at_ref, current, gated)
    since = entries_since(at_ref.meta, current.meta)
    missing = unexplained(lowered, since)
    if not missing:
        if not lowered:
            return LoweredOutcome(True, f"no gated value of {path} is lower than at {ref}")
        return LoweredOutcome(True, f"{_counted(len(lowered), 'gated value', 'gated values')} of {path} lower than "
                                    f"at {ref}, each with a reason recorded since "
                                    f"({_counted(len(since), 'entry', 'entries')} of _meta.lowerings)")
    shown_missing = "; ".join(x.text() for x in missing[:_SHOWN]) + (
        f"; … and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else "")
    then = gated_in_files(at_ref.meta)  # what the thresholds recorded at ref gated
    newly = sorted({x.metric for x in missing
                    if (x.metric if x.qid is not None else AGGREGATE + x.metric) not in then
                    and (x.qid is not None or SIGNIFICANT + x.metric not in then)})
    if newly:
        one = len(newly) == 1
        is_, was, it = ("is", "was", "it") if one else ("are", "were", "them")
        shown_missing += (f" ({', '.join(newly)} {is_} gated now but {was} not at {ref}: a reason recorded before "
                          f"the thresholds gated {it} does not name {it})")
    return LoweredOutcome(
        False,
        f"{_counted(len(missing), 'gated value', 'gated values')} of {path} lower than at {ref} with no reason "
        f"recorded since: {shown_missing}. A baseline only goes down with a written reason: restore the file as "
        f"it is at {ref} (git checkout {ref} -- {path}) and re-measure it with `{REASON_COMMAND}`, "
        "which records the reason in _meta.lowerings",
        tuple(missing))
