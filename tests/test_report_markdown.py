"""The Markdown summary: verdict headline, tables kept intact, worst-N table escaped."""

from __future__ import annotations

from pytest_ragmetrics.gate.baseline import Baseline
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.gate.verdict import QueryRecord
from verdicts import judge
from pytest_ragmetrics.golden import GoldenSet, Query
from pytest_ragmetrics.measures import MeasurementConfig
from pytest_ragmetrics.report.markdown import verdict_markdown

METRICS = ["recall@10"]


def verdict(now: dict[str, float]):
    golden = GoldenSet("g.yaml", (Query("q1", "plain question", {"a": 1}, ("standard",)),
                                  Query("q2", "a | pipe and <b>tag</b>\nnewline", {"b": 2}, ("paraphrase",))))
    records = {q: QueryRecord(q, "scored", {"recall@10": v}, ["x|y"], [], 1) for q, v in now.items()}
    baseline = Baseline({}, {}, {"q1": {"recall@10": 1.0}, "q2": {"recall@10": 1.0}})
    return judge(records, golden, baseline, Thresholds.defaults(MeasurementConfig(tuple(METRICS))), METRICS)


def test_failed_summary_has_gate_table_and_escaped_worst_list() -> None:
    text = verdict_markdown(verdict({"q1": 1.0, "q2": 0.0}), worst_n=5)
    assert text.startswith("## Retrieval gate: failed")
    assert "- gate recall@10: recall@10 fell 0.5000" in text
    table, rest = text.split("\n\nn = 2 queries", 1)  # the note is its own paragraph, not a table row
    assert table.rstrip().endswith("|")
    worst = rest.split("### Worst regressed queries (1 of 1)", 1)[1]
    row = next(line for line in worst.splitlines() if line.startswith("| 1 "))
    assert row.count("|") - row.count("\\|") == 7  # six cells: the pipes in the data are escaped
    assert "a \\| pipe" in row and "x\\|y" in row and "\n" not in row


def test_passing_summary() -> None:
    text = verdict_markdown(verdict({"q1": 1.0, "q2": 1.0}), worst_n=5)
    assert text.startswith("## Retrieval gate: passed")
    assert "No query fell beyond its per-query tolerance." in text


def test_tables_with_chinese_text_line_up_in_a_terminal() -> None:
    from pytest_ragmetrics.report.tables import display_width, markdown_table

    assert display_width("咖啡 V60") == 8 and display_width("abc") == 3
    lines = markdown_table(["question", "ndcg@10"], [["手冲咖啡的水温", 0.5], ["grind size", 1.0]]).splitlines()
    assert len({display_width(line) for line in lines}) == 1  # every row as wide on screen as the header
    assert lines[2] == "| 手冲咖啡的水温 | 0.5000  |"
