"""thresholds.json: how far each metric may fall before the gate fails.

Flat keys over documented defaults: ``<metric>_tolerance`` (allowed drop of the
mean), ``<metric>_query_tolerance`` (allowed drop of one query), ``<metric>_min``
(a floor), ``max_regressed_queries``, ``worst_n`` and ``fail_on_regression``; and how old a
label may be: ``max_label_age_days`` (all records), ``tag:<tag>/max_label_age_days`` (records
with that tag) and ``fail_on_stale_labels``; and ``max_harvested_share``, the share of harvested
questions above which the report warns that the golden set over-fits known failures.
Every problem names the file and the key: a gate that silently loosened would
be worse than none.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragmetrics.errors import MeasureError, ThresholdsError, brief_repr
from pytest_ragmetrics.files import loads_json
from pytest_ragmetrics.measures import MeasurementConfig, parse_measure

__all__ = ["DEFAULT_MAX_HARVESTED_SHARE", "Thresholds", "load_thresholds", "recorded_thresholds", "stricter",
           "thresholds_from_mapping"]


_SUFFIXES = ("_query_tolerance", "_tolerance", "_min")
_SCALARS = {"max_regressed_queries", "worst_n", "fail_on_regression", "fail_on_significant_drop",
            "max_label_age_days", "fail_on_stale_labels", "max_ungated_queries", "require_independent_scope"}
_FLAGS = ("fail_on_regression", "fail_on_significant_drop", "fail_on_stale_labels", "require_independent_scope")
#: ``tag:<tag>/max_label_age_days``: the age limit of the labels of records carrying ``<tag>``
_TAG_PREFIX, _AGE_KEY = "tag:", "max_label_age_days"
#: The gates of the questions marked answerable: false (false retrieval: higher is worse).
_NO_ANSWER_KEYS = ("false_retrieval_rate_tolerance", "false_retrieval_rate_max")
#: The share of a golden set's questions that may be harvested failures before the report warns.
_HARVESTED_KEY = "max_harvested_share"
DEFAULT_MAX_HARVESTED_SHARE = 0.3

#: Why a value gates nothing, by key suffix: metrics lie in [0, 1], so a tolerance of 1 or more
#: allows every drop, and a floor above 1 is never reached.
_ABOVE_ONE = {
    "_tolerance": "no mean can fall by more than 1, so this gate would never fail",
    "_query_tolerance": "no query can fall by more than 1, so its item would never fail",
    "_min": "no run reaches a floor above 1, so this gate would never pass",
}


@dataclass(frozen=True)
class _NonFinite:
    """What ``NaN``/``Infinity`` parse to here, so the message can name the key holding it."""

    token: str


def _non_finite(value: Any) -> _NonFinite | None:
    """The first NaN or Infinity anywhere inside ``value`` (walked without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _NonFinite):
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


@dataclass
class Thresholds:
    """Tolerances as read from thresholds.json, with the documented defaults.

    Defaults when a key is absent: every ``recall@k`` allows no drop, neither in
    the aggregate nor for a single query (without recall@k, and with no metric gated by
    the file, the first metric measured takes that default); other metrics are reported, not gated;
    no cap on the number of regressed queries; ``worst_n`` 10; failures fail.
    """

    tolerance: dict[str, float] = field(default_factory=dict)
    minimum: dict[str, float] = field(default_factory=dict)
    query_tolerance: dict[str, float] = field(default_factory=dict)
    max_regressed_queries: int | None = None
    worst_n: int = 10
    fail_on_regression: bool = True
    #: an ungated metric that fell beyond chance (p < 0.01) and by more than 1/n fails its own gate
    fail_on_significant_drop: bool = True
    path: str | None = None
    #: days a label stays fresh, for every record (None: labels do not age)
    max_label_age_days: int | None = None
    #: tag -> days a label stays fresh for the records carrying that tag
    tag_max_label_age_days: dict[str, int] = field(default_factory=dict)
    #: stale (or undated) labels under a limit fail the stale-labels gate instead of warning
    fail_on_stale_labels: bool = False

    @property
    def ages_labels(self) -> bool:
        """Whether any age limit is set, globally or for a tag."""
        return self.max_label_age_days is not None or bool(self.tag_max_label_age_days)
    #: allowed rise of the false-retrieval rate against the baseline (None: not gated)
    false_retrieval_rate_tolerance: float | None = None
    #: ceiling on the run's false-retrieval rate (None: none)
    false_retrieval_rate_max: float | None = None
    #: above this share of harvested questions the report warns: such a set over-fits known failures
    max_harvested_share: float = DEFAULT_MAX_HARVESTED_SHARE
    #: labelled questions of the golden set allowed to have no baseline entry (the coverage gate)
    max_ungated_queries: int = 0
    #: scope checked only against the metadata the retriever returned fails the leak gate
    require_independent_scope: bool = False
    #: metric keys set to null: a default gate removed in words (``"recall@10_query_tolerance": null``)
    ungated: set[str] = field(default_factory=set)

    @classmethod
    def defaults(cls, config: MeasurementConfig) -> Thresholds:
        """No drop of any ``recall@k``, in the mean or for one query; without recall, the same for the
        first metric measured, so that a run always has a hard gate."""
        return _with_a_hard_gate(_recall_defaults(config), config)

    def defaults_text(self) -> str:
        """The built-in defaults in force, in words: which metrics may not drop."""
        held = [m for m in self.tolerance if self.tolerance[m] == 0.0 and self.query_tolerance.get(m) == 0.0]
        first = "" if any(m.startswith("recall@") for m in held) else \
            " (no recall@k is measured, so the first metric measured is held as recall@k would be)"
        return f"{', '.join(held) or 'no metric'} may not drop{first}; other metrics are reported, not gated"

    @property
    def gates_a_metric(self) -> bool:
        """Whether any metric has a hard gate on its change: a tolerance or a per-query tolerance. A floor
        judges a level, not a change: alone it leaves a fall above it unjudged."""
        return bool(self.tolerance or self.query_tolerance)

    def to_dict(self) -> dict[str, Any]:
        """The thresholds in force, as the flat keys of a thresholds file (defaults included)."""
        out: dict[str, Any] = {}
        for metric, value in self.tolerance.items():
            out[f"{metric}_tolerance"] = value
        for metric, value in self.minimum.items():
            out[f"{metric}_min"] = value
        for metric, value in self.query_tolerance.items():
            out[f"{metric}_query_tolerance"] = value
        out["max_regressed_queries"] = self.max_regressed_queries
        out["worst_n"] = self.worst_n
        out["fail_on_regression"] = self.fail_on_regression
        out["fail_on_significant_drop"] = self.fail_on_significant_drop
        # the label-age keys only when set: thresholds that age no label read as they always did
        if self.max_label_age_days is not None:
            out[_AGE_KEY] = self.max_label_age_days
        for tag, days in self.tag_max_label_age_days.items():
            out[f"{_TAG_PREFIX}{tag}/{_AGE_KEY}"] = days
        if self.fail_on_stale_labels:
            out["fail_on_stale_labels"] = True
        for key in _NO_ANSWER_KEYS:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.max_harvested_share != DEFAULT_MAX_HARVESTED_SHARE:  # as the label ages: only when set
            out[_HARVESTED_KEY] = self.max_harvested_share
        if self.max_ungated_queries:  # as the label ages: only when set
            out["max_ungated_queries"] = self.max_ungated_queries
        if self.require_independent_scope:
            out["require_independent_scope"] = True
        for key in sorted(self.ungated):
            out[key] = None
        return out


def _recall_defaults(config: MeasurementConfig) -> Thresholds:
    recall = {str(m): 0.0 for m in config.measures if m.name == "recall"}
    return Thresholds(tolerance=dict(recall), query_tolerance=dict(recall))


def _with_a_hard_gate(result: Thresholds, config: MeasurementConfig, name: str = "thresholds") -> Thresholds:
    """``result``, where no metric has a hard gate, with recall's default (no drop, in the mean or for one
    query) given to the first metric measured: a run always gates something. A file that set a gate to
    null and left none is refused rather than gated on a metric it did not name."""
    if result.gates_a_metric or not config.metric_names:
        return result
    if result.ungated:
        verb = "is" if len(result.ungated) == 1 else "are"
        raise ThresholdsError(f"{name}: {', '.join(sorted(result.ungated))} {verb} "
                              "null and no other metric has a tolerance or a per-query tolerance, so this "
                              "run would gate no metric's change; gate one, or set \"fail_on_regression\": false "
                              "to only report")
    first = config.metric_names[0]
    result.tolerance[first] = 0.0
    result.query_tolerance[first] = 0.0
    return result


def load_thresholds(path: str | Path | None, config: MeasurementConfig, *, required: bool = True) -> Thresholds:
    """Read thresholds.json over the defaults.

    A path the user gave (``required``) must exist: falling back to the defaults
    would run fewer gates than asked for without a word. Only the plugin's default
    path, ``baselines/thresholds.json``, may be absent (``required=False``), and
    then the defaults apply. Unknown keys, metrics that are not measured, negative
    tolerances, values above 1 (metrics lie in [0, 1], so such a gate never acts),
    NaN, values of the wrong type and repeated keys are errors naming the file and
    the key.
    """
    result = Thresholds.defaults(config)
    if path is None:
        return result
    result = _recall_defaults(config)
    path = Path(path)
    name = str(path)
    if not path.exists():
        if path.is_symlink():  # a link to a moved or deleted file must not mean "no file, use the defaults"
            raise ThresholdsError(f"{name}: a symbolic link to {os.readlink(path)!r}, which does not exist (or "
                                  "loops); fix the link, or remove it to gate with the defaults")
        if required:
            raise ThresholdsError(f"{name}: thresholds file not found; fix the path, create the file, "
                                  "or leave the option unset to gate with the defaults")
        return Thresholds.defaults(config)
    result.path = name
    try:
        data = loads_json(path.read_text(encoding="utf-8-sig"), parse_constant=_NonFinite)
    except json.JSONDecodeError as exc:
        raise ThresholdsError(f"{name}, line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise ThresholdsError(f"{name}: not a thresholds file (JSON nested too deeply)") from None
    except (ValueError, OSError) as exc:
        raise ThresholdsError(f"{name}: {exc}") from None
    _refuse_non_finite(name, data)
    return thresholds_from_mapping(data, config, name, result)


def thresholds_from_mapping(data: Any, config: MeasurementConfig, name: str,
                            result: Thresholds | None = None) -> Thresholds:
    """Thresholds from the flat keys of a thresholds file (or the copy a run artifact
    records), over the defaults; every check of :func:`load_thresholds` applies."""
    if result is None:
        result = _recall_defaults(config)
        result.path = name
    if not isinstance(data, dict):
        raise ThresholdsError(f"{name}: expected a JSON object of flat keys like \"recall@10_tolerance\"")
    measured = set(config.metric_names)
    for key, value in data.items():
        if key.startswith("_"):
            continue
        if key in _SCALARS:
            _set_scalar(result, name, key, value)
            continue
        if key.startswith(_TAG_PREFIX) or key.lower().startswith(("tag:", "tags:", "tag/", "tag_")):
            _set_tag_age(result, name, key, value)
            continue
        if key == _HARVESTED_KEY:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= 1:
                raise ThresholdsError(f"{name}: {key!r} must be a number in [0, 1] (the share of harvested "
                                      f"questions above which the report warns), got {brief_repr(value)}")
            result.max_harvested_share = float(value)
            continue
        if key in _NO_ANSWER_KEYS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= 1:
                raise ThresholdsError(f"{name}: {key!r} must be a number in [0, 1] (a rate of false retrievals), "
                                      f"got {brief_repr(value)}")
            if key.endswith("_tolerance") and value >= 1:
                raise ThresholdsError(f"{name}: {key!r} is {value}; a rate cannot rise by more than 1, so this gate "
                                      "would never fail. Give a value in [0, 1), or remove the key to not gate the "
                                      "rate's rise")
            setattr(result, key, float(value))
            continue
        close = difflib.get_close_matches(key, _NO_ANSWER_KEYS, n=1, cutoff=0.8)
        if close or key.startswith("false_retrieval"):
            raise ThresholdsError(f"{name}: unknown key {key!r}; did you mean {(close or list(_NO_ANSWER_KEYS))[0]!r}? "
                                  f"(questions with no answer are gated by {' and '.join(_NO_ANSWER_KEYS)})")
        for suffix in _SUFFIXES:
            if key.endswith(suffix):
                written = key[: -len(suffix)]
                metric = _canonical_metric(written)
                if metric != written and metric in measured:
                    # one metric, one key: "Recall@10" or "recall@010" beside "recall@10" would be
                    # two keys for one gate, and whichever came last would win
                    raise ThresholdsError(
                        f"{name}: key {key!r} spells metric {metric!r} as {written!r}; write it "
                        f"{metric + suffix!r} (keys are case-sensitive and each metric has one spelling)"
                    )
                if metric not in measured:
                    close = difflib.get_close_matches(metric, config.metric_names, n=1)
                    hint = f"; did you mean {close[0] + suffix!r}?" if close else "; measure it or remove the key"
                    raise ThresholdsError(
                        f"{name}: key {key!r} names metric {key[: -len(suffix)]!r}, which is not measured "
                        f"(measured: {', '.join(config.metric_names)}){hint}"
                    )
                target = {"_tolerance": result.tolerance, "_min": result.minimum,
                          "_query_tolerance": result.query_tolerance}[suffix]
                if value is None:  # said in words: this metric is not gated this way (a default removed)
                    target.pop(metric, None)
                    result.ungated.add(key)
                    break
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ThresholdsError(f"{name}: {key!r} must be a number (or null: not gated), got "
                                          f"{brief_repr(value)}")
                if suffix != "_min" and value < 0:
                    raise ThresholdsError(f"{name}: {key!r} is {value}; a tolerance is an allowed drop, so it must be "
                                          ">= 0")
                if suffix == "_min" and value <= 0:
                    raise ThresholdsError(f"{name}: {key!r} is {value}; a floor must lie in (0, 1]: "
                                          + ("no mean falls under 0, so this gate would never fail" if value == 0
                                             else "a metric is never negative") + f". Write null to set no floor "
                                          f"for {metric}")
                if value > 1 or (value >= 1 and suffix != "_min"):
                    raise ThresholdsError(
                        f"{name}: {key!r} is {value}, {'above' if value > 1 else 'at'} 1; metrics lie in [0, 1]: "
                        f"{_ABOVE_ONE[suffix]}. Give a value in {'[0, 1]' if suffix == '_min' else '[0, 1)'}, or "
                        f"write null to not gate {metric} this way"
                    )
                result.ungated.discard(key)
                target[metric] = float(value)
                break
        else:
            close = difflib.get_close_matches(key, sorted({*_SCALARS, _HARVESTED_KEY}), n=1)
            raise ThresholdsError(
                f"{name}: unknown key {key!r}; expected <metric>_tolerance, <metric>_min, "
                "<metric>_query_tolerance, max_regressed_queries, worst_n, fail_on_regression, "
                "fail_on_significant_drop, false_retrieval_rate_tolerance, false_retrieval_rate_max, "
                "max_label_age_days, tag:<tag>/max_label_age_days, "
                "fail_on_stale_labels, max_harvested_share, max_ungated_queries, require_independent_scope "
                "or _comment"
                + (f"; did you mean {close[0]!r}?" if close else "")
            )
    _with_a_hard_gate(result, config, name)
    if result.fail_on_stale_labels and not result.ages_labels:
        raise ThresholdsError(f"{name}: 'fail_on_stale_labels' is true but no label has an age limit, so it would "
                              f"check nothing; add {_AGE_KEY!r} (or {_TAG_PREFIX}<tag>/{_AGE_KEY}), or remove it")
    return result


def _age_days(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ThresholdsError(f"{name}: {key!r} must be a positive whole number of days, got {brief_repr(value)}"
                              + (" (write the number without quotes)" if isinstance(value, str) else ""))
    return value


def _set_tag_age(result: Thresholds, name: str, key: str, value: Any) -> None:
    """``tag:<tag>/max_label_age_days``; any other spelling is an error with the one expected."""
    head, slash, setting = key.rpartition("/")
    tag = head[len(_TAG_PREFIX):] if head.startswith(_TAG_PREFIX) else ""
    if not key.startswith(_TAG_PREFIX) or not slash or setting != _AGE_KEY or not tag.strip():
        guess = tag or (head.split(":", 1)[-1] if ":" in head else head[4:]) or "<tag>"
        raise ThresholdsError(f"{name}: unknown key {key!r}; a per-tag key is written "
                              f"'{_TAG_PREFIX}<tag>/{_AGE_KEY}' (did you mean '{_TAG_PREFIX}{guess}/{_AGE_KEY}'?)")
    result.tag_max_label_age_days[tag] = _age_days(name, key, value)


def _refuse_non_finite(name: str, data: Any) -> None:
    """NaN or Infinity anywhere is an error naming the key that holds it (JSON allows
    neither; Python's reader does, and a NaN tolerance would compare false everywhere)."""
    items = list(data.items()) if isinstance(data, dict) else [(None, data)]
    for key, value in items:
        found = _non_finite(value)
        if found is None:
            continue
        problem = f"{found.token} is not a valid metric value"
        if key is None:
            raise ThresholdsError(f"{name}: {problem}")
        gates = any(key.endswith(suffix) for suffix in _SUFFIXES)
        raise ThresholdsError(f"{name}: {key!r} {'is' if value is found else 'holds'} {found.token}; {problem}. "
                              + ("Write a number in [0, 1], or null to not gate this way"
                                 if gates else "Write the value as a number or string JSON allows"))


def _canonical_metric(text: str) -> str:
    try:
        return str(parse_measure(text))
    except MeasureError:
        return text


def _set_scalar(result: Thresholds, name: str, key: str, value: Any) -> None:
    if key == _AGE_KEY:
        result.max_label_age_days = _age_days(name, key, value)
        return
    if key in _FLAGS:
        if not isinstance(value, bool):
            raise ThresholdsError(f"{name}: {key!r} must be true or false, got {brief_repr(value)}")
        setattr(result, key, value)
        return
    if value is None and key == "max_regressed_queries":
        result.max_regressed_queries = None
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ThresholdsError(f"{name}: {key!r} must be a non-negative integer, got {brief_repr(value)}")
    setattr(result, key, value)


def recorded_thresholds(meta: Any, config: MeasurementConfig, name: str) -> Thresholds | None:
    """The thresholds a run artifact (or baseline) records it was gated with, for the
    metrics in ``config``; ``None`` when it records none."""
    recorded = meta.get("thresholds") if isinstance(meta, dict) else None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("values"), dict):
        return None
    if (recorded.get("source") or "defaults") == "defaults":
        _check_recorded_defaults(meta, recorded["values"], config, name)
    measured = set(config.metric_names)
    values = {key: value for key, value in recorded["values"].items()
              if key in _SCALARS or key.startswith(_TAG_PREFIX) or key in _NO_ANSWER_KEYS or key == _HARVESTED_KEY
              or any(key.endswith(s) and _canonical_metric(key[: -len(s)]) in measured for s in _SUFFIXES)}
    return thresholds_from_mapping(values, config, f"{name} (as gated: {recorded.get('source') or 'defaults'})")


def _check_recorded_defaults(meta: dict[str, Any], values: dict[str, Any], config: MeasurementConfig,
                             name: str) -> None:
    """Recorded thresholds that say "defaults" must hold the built-in defaults of the run's own
    measurement config: a reader gates with the values, and a header saying "defaults" over
    loosened ones would hide that the gate was opened."""
    try:
        own = MeasurementConfig.from_dict(meta["measurement"])
    except (KeyError, TypeError, ValueError, MeasureError):
        own = config
    expected = Thresholds.defaults(own).to_dict()
    for key, value in values.items():
        if key.startswith("_"):
            continue
        default = expected.get(key, _NOT_A_DEFAULT)
        if default is _NOT_A_DEFAULT or isinstance(value, bool) != isinstance(default, bool) or value != default:
            built_in = ("the built-in defaults have no such key" if default is _NOT_A_DEFAULT
                        else f"the built-in default is {json.dumps(default)}")
            raise ThresholdsError(f"{name}: _meta.thresholds says defaults but holds {key!r}: "
                                  f"{brief_repr(value)}; {built_in}. The file was edited after its run: "
                                  "measure it again rather than trusting these values")


_NOT_A_DEFAULT = object()


def stricter(first: Thresholds, second: Thresholds, path: str) -> Thresholds:
    """Per key the stricter of two sets of thresholds: the lower tolerance, the higher floor, the lower
    cap on regressed queries, a failure that fails if either says so. A metric one side gates and the
    other does not stays gated. Judging two recorded runs, neither file alone may loosen the gate."""

    def lowest(x: dict[str, float], y: dict[str, float]) -> dict[str, float]:
        return {m: min(v for v in (x.get(m), y.get(m)) if v is not None) for m in {**x, **y}}

    caps = [c for c in (first.max_regressed_queries, second.max_regressed_queries) if c is not None]
    return Thresholds(
        tolerance=lowest(first.tolerance, second.tolerance),
        minimum={m: max(v for v in (first.minimum.get(m), second.minimum.get(m)) if v is not None)
                 for m in {**first.minimum, **second.minimum}},
        query_tolerance=lowest(first.query_tolerance, second.query_tolerance),
        max_regressed_queries=min(caps) if caps else None,
        worst_n=max(first.worst_n, second.worst_n),
        fail_on_regression=first.fail_on_regression or second.fail_on_regression,
        fail_on_significant_drop=first.fail_on_significant_drop or second.fail_on_significant_drop,
        path=path,
        max_label_age_days=min(ages) if (ages := [a for a in (first.max_label_age_days,
                                                               second.max_label_age_days) if a is not None]) else None,
        tag_max_label_age_days={t: min(v for v in (first.tag_max_label_age_days.get(t),
                                                   second.tag_max_label_age_days.get(t)) if v is not None)
                                for t in {**first.tag_max_label_age_days, **second.tag_max_label_age_days}},
        fail_on_stale_labels=first.fail_on_stale_labels or second.fail_on_stale_labels,
        max_harvested_share=min(first.max_harvested_share, second.max_harvested_share),
        max_ungated_queries=min(first.max_ungated_queries, second.max_ungated_queries),
        require_independent_scope=first.require_independent_scope or second.require_independent_scope,
        ungated=first.ungated & second.ungated,
        **{key: min(v) if (v := [x for x in (getattr(first, key), getattr(second, key)) if x is not None]) else None
           for key in _NO_ANSWER_KEYS},
    )
