"""Gates are declared once, in ``gate/gates/``: the docs' gate table is made from them, every
thresholds key the reader accepts belongs to a gate (or is one of the few that shape a report), and
a run collects exactly the items its gates judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ragmetrics.gate import thresholds as thresholds_module
from pytest_ragmetrics.gate.inputs import GatePlan
from pytest_ragmetrics.gate.registry import gate_names, gate_table, registered
from pytest_ragmetrics.gate.thresholds import Thresholds, load_thresholds
from pytest_ragmetrics.measures import MeasurementConfig, parse_measures

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
#: keys that shape the report or the run rather than a gate
REPORT_KEYS = {"worst_n", "fail_on_regression", "max_harvested_share"}


def documented_table(text: str) -> str:
    return text.split("<!-- gate table: generated from pytest_ragmetrics.gate.registry.gate_table() -->\n", 1)[1] \
        .split("\n<!-- end of gate table -->", 1)[0]


def test_the_docs_gate_table_is_the_registry() -> None:
    assert documented_table(DOC.read_text(encoding="utf-8")) == gate_table()


def test_the_check_sees_a_changed_gate() -> None:
    text = DOC.read_text(encoding="utf-8")
    changed = text.replace("| `coverage` |", "| `coverage-x` |")
    assert changed != text and documented_table(changed) != gate_table()


def test_each_gate_is_declared_once_with_a_summary() -> None:
    kinds = [g.kind for g in registered()]
    assert len(kinds) == len(set(kinds))
    assert all(g.summary for g in registered())


def _declared_keys() -> set[str]:
    return {k.key for g in registered() for k in g.keys}


def test_every_key_the_reader_accepts_belongs_to_a_gate_or_a_report() -> None:
    config = MeasurementConfig(parse_measures(["recall@10", "ndcg@10"]))
    declared = _declared_keys() | REPORT_KEYS
    accepted = set(thresholds_module._SCALARS) | {thresholds_module._HARVESTED_KEY, *thresholds_module._NO_ANSWER_KEYS}
    accepted |= {f"<metric>{suffix}" for suffix in thresholds_module._SUFFIXES}
    accepted.add(f"{thresholds_module._TAG_PREFIX}<tag>/{thresholds_module._AGE_KEY}")
    assert accepted - declared == set(), "keys read but declared by no gate"
    assert declared - accepted == set(), "keys declared by a gate that the reader refuses"
    # and the reader really takes each declared key
    for key in sorted(declared - {"<metric>_min"}):
        value: object = {"fail_on_regression": True, "fail_on_significant_drop": True, "fail_on_stale_labels": False,
                         "require_independent_scope": True, "max_harvested_share": 0.5}.get(key.replace("<metric>", "x"),
                                                                                              0)
        name = key.replace("<metric>", "ndcg@10").replace("<tag>", "news")
        if "label_age" in key:
            value = 30
        thresholds_module.thresholds_from_mapping({name: value}, config, "t.json")


@pytest.mark.parametrize("data, expected", [
    ({}, ["baseline", "coverage", "recall@10", "significant-drops"]),
    ({"max_regressed_queries": 2, "ndcg@10_tolerance": 0.1}, ["baseline", "coverage", "recall@10", "ndcg@10",
                                                              "regressed-queries"]),
    ({"fail_on_significant_drop": False}, ["baseline", "coverage", "recall@10"]),
    ({"false_retrieval_rate_max": 0.2, "max_label_age_days": 10, "fail_on_stale_labels": True},
     ["baseline", "coverage", "recall@10", "significant-drops", "false_retrieval_rate", "stale-labels"]),
])
def test_the_gates_a_run_collects(tmp_path: Path, data: dict[str, object], expected: list[str]) -> None:
    config = MeasurementConfig(parse_measures(["recall@10", "ndcg@10"]))
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    t = load_thresholds(path, config)
    assert gate_names(GatePlan(tuple(config.metric_names), t, False, False, False)) == expected
    assert gate_names(GatePlan(tuple(config.metric_names), t, True, True, False)) == [*expected, "unjudged", "leak"]


def test_without_recall_the_first_metric_is_gated_and_a_gate_named_takes_over() -> None:
    config = MeasurementConfig(parse_measures(["ndcg@10", "mrr@10"]))
    assert Thresholds.defaults(config).tolerance == {"ndcg@10": 0.0}
    assert Thresholds.defaults(config).query_tolerance == {"ndcg@10": 0.0}
    named = thresholds_module.thresholds_from_mapping({"mrr@10_tolerance": 0.05}, config, "t.json")
    assert named.tolerance == {"mrr@10": 0.05} and named.query_tolerance == {}
    floored = thresholds_module.thresholds_from_mapping({"mrr@10_min": 0.3}, config, "t.json")
    assert floored.tolerance == {"ndcg@10": 0.0}  # a floor judges a level, not a change: the default stays
    assert floored.minimum == {"mrr@10": 0.3}
    counted = thresholds_module.thresholds_from_mapping({"max_regressed_queries": 1}, config, "t.json")
    assert counted.tolerance == {"ndcg@10": 0.0}  # a cap on regressed queries gates no metric by itself
