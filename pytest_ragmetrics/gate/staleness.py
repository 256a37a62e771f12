"""Labels that age: which golden records hold judgments older than thresholds.json allows.

A label may carry the date it was judged (``judged_at``, on the record or on one
judgment; a judgment's own date wins). ``max_label_age_days`` limits the age of every
label, ``tag:<tag>/max_label_age_days`` that of the records carrying ``<tag>``; a record
under several limits gets the strictest. A record is **stale** when any of its dated
judgments is older than its limit, and **undated** when it is not stale but a judgment
has no date at all: under a limit, a label of unknown age is never taken for fresh.

With ``fail_on_stale_labels`` both fail the ``stale-labels`` gate; otherwise they are a
warning. Pure functions over the golden set and the thresholds: the plugin, the
reports and the run artifact all read the same :class:`LabelAges`.
"""

from __future__ import annotations

import datetime as _dt
import difflib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import ThresholdsError, listed, shown
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.golden import GoldenSet, Query

__all__ = ["GATE", "StaleRecord", "LabelAges", "label_ages", "limit_of", "check_tags"]

#: The gate item that exists when ``fail_on_stale_labels`` is true.
GATE = "stale-labels"


@dataclass(frozen=True)
class StaleRecord:
    """A record whose oldest label is older than its limit (``oldest`` None: a label is undated)."""

    qid: str
    oldest: str | None  # ISO date of the oldest dated label
    age: int | None  # days since then
    limit: int
    limit_key: str  # the thresholds key the limit comes from

    def text(self) -> str:
        if self.oldest is None:
            return f"{shown(self.qid)} (a label without judged_at; limit {self.limit} days, {self.limit_key})"
        return (f"{shown(self.qid)} (oldest label {self.oldest}, {self.age} days old; "
                f"limit {self.limit} days, {self.limit_key})")

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "oldest": self.oldest, "age_days": self.age, "limit_days": self.limit,
                "limit_key": self.limit_key}


@dataclass
class LabelAges:
    """How old the labels of a run's records are, against the limits in force."""

    today: str
    checked: int  # records under an age limit
    stale: list[StaleRecord] = field(default_factory=list)
    undated: list[StaleRecord] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)  # thresholds key -> days
    fail: bool = False

    @property
    def share_stale(self) -> float | None:
        """Stale records among those checked (None when none is under a limit)."""
        return len(self.stale) / self.checked if self.checked else None

    def limits_text(self) -> str:
        return ", ".join(f"{key} {days}" for key, days in self.limits.items())

    def header(self) -> str:
        """The session header's line: how many records are stale and undated under which limits."""
        return (f"labels: {len(self.stale)} of {self.checked} records stale, {len(self.undated)} undated "
                f"({self.limits_text()}; today {self.today} UTC)"
                + ("; fail_on_stale_labels" if self.fail else ""))

    def problem(self) -> str | None:
        """One sentence naming the stale and undated records (their details are in :meth:`lines`),
        or None when there is none."""
        parts = []
        if self.stale:
            parts.append(f"{len(self.stale)} of {self.checked} records {'has' if len(self.stale) == 1 else 'have'} "
                         f"labels older than their limit ({listed([r.qid for r in self.stale])})")
        if self.undated:
            parts.append(f"{len(self.undated)} {'is' if len(self.undated) == 1 else 'are'} undated: under an age "
                         f"limit, with a label that has no judged_at ({listed([r.qid for r in self.undated])})")
        if not parts:
            return None
        return ("; ".join(parts) + "; see 'Label ages' for dates and limits. Judge them again (ragmetrics annotate "
                "dates every grade) and update judged_at")

    def warning(self) -> str | None:
        """What a run says when stale labels only warn (``fail_on_stale_labels`` is false)."""
        problem = self.problem()
        if problem is None or self.fail:
            return None
        return f"stale labels: {problem} (set \"fail_on_stale_labels\": true to fail the gate on them)"

    def lines(self) -> list[str]:
        """The report's list: one line a stale or undated record."""
        if not self.stale and not self.undated:
            return []
        out = [f"Label ages ({self.limits_text()}; today {self.today} UTC): {len(self.stale)} of {self.checked} "
               f"records stale, {len(self.undated)} undated"]
        out += [f"  stale    {r.text()}" for r in self.stale]
        out += [f"  undated  {r.text()}" for r in self.undated]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"today": self.today, "checked": self.checked, "limits": dict(self.limits), "fail": self.fail,
                "stale": [r.to_dict() for r in self.stale], "undated": [r.to_dict() for r in self.undated]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LabelAges:
        def records(rows: Any) -> list[StaleRecord]:
            return [StaleRecord(r["qid"], r.get("oldest"), r.get("age_days"), r["limit_days"], r["limit_key"])
                    for r in rows or []]

        return cls(str(data.get("today")), int(data.get("checked") or 0), records(data.get("stale")),
                   records(data.get("undated")), dict(data.get("limits") or {}), bool(data.get("fail")))


def limit_of(query: Query, thresholds: Thresholds) -> tuple[int, str] | None:
    """The strictest age limit over ``query`` and the key it comes from (None: its labels do not age)."""
    found = []
    if thresholds.max_label_age_days is not None:
        found.append((thresholds.max_label_age_days, "max_label_age_days"))
    for tag in query.tags:
        days = thresholds.tag_max_label_age_days.get(tag)
        if days is not None:
            found.append((days, f"tag:{tag}/max_label_age_days"))
    return min(found) if found else None


def check_tags(thresholds: Thresholds, tags: Sequence[str]) -> None:
    """A per-tag limit must name a tag of the golden set: a misspelt tag would age no label, silently."""
    known = set(tags)
    for tag in thresholds.tag_max_label_age_days:
        if tag not in known:
            close = difflib.get_close_matches(tag, sorted(known), n=1)
            hint = f"; did you mean 'tag:{close[0]}/max_label_age_days'?" if close else ""
            raise ThresholdsError(
                f"{thresholds.path or 'thresholds'}: key 'tag:{tag}/max_label_age_days' names tag {tag!r}, which "
                f"no record of the golden set carries (tags: {', '.join(sorted(known)) or 'none'}){hint}")


def label_ages(golden: GoldenSet, thresholds: Thresholds, today: _dt.date | None = None) -> LabelAges | None:
    """The stale and undated records of ``golden`` under ``thresholds`` (None when no limit is set)."""
    if not thresholds.ages_labels:
        return None
    day = today or _dt.datetime.now(_dt.timezone.utc).date()
    result = LabelAges(day.isoformat(), 0, fail=thresholds.fail_on_stale_labels)
    if thresholds.max_label_age_days is not None:
        result.limits["max_label_age_days"] = thresholds.max_label_age_days
    for tag, days in thresholds.tag_max_label_age_days.items():
        result.limits[f"tag:{tag}/max_label_age_days"] = days
    for query in golden:
        limit = limit_of(query, thresholds)
        if limit is None:
            continue
        result.checked += 1
        dates: dict[str, _dt.date | None] = dict(query.judgment_dates())
        if not query.answerable:  # "the corpus has no answer" is a label too, dated by its record
            dates[""] = query.judged_at
        dated = [d for d in dates.values() if d is not None]
        oldest = min(dated) if dated else None
        if oldest is not None and (day - oldest).days > limit[0]:
            result.stale.append(StaleRecord(query.qid, oldest.isoformat(), (day - oldest).days, *limit))
        elif len(dated) < len(dates):
            result.undated.append(StaleRecord(query.qid, None, None, *limit))
    return result
