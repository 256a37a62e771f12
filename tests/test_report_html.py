"""The HTML report: escaping and self-containment, then a real headless Chromium.

The browser test needs Debian's `chromium` (installed by .ci/run; the helpers are in
tests/browser.py); on a machine without it that one test skips with the reason. Its screenshot is kept in
`test-artifacts/` for a person to look at.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser import browse, console_errors
from pytest_ragmetrics.report.html import render_html

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"

HOSTILE = '<script>alert("x")</script> | and </td> & "quotes"'


def artifact() -> dict:
    """A run artifact as the plugin writes it (docs/run-artifact.md): two queries, one regressed."""
    return {
        "_meta": {"golden": {"source": "eval/golden.yaml", "n_queries": 2}, "k": 10,
                  "measurement": {"metrics": ["recall@10", "ndcg@10"]}, "subset": "full",
                  "package_version": "0.1.0", "git_commit": None, "created": "2026-01-01T00:00:00+00:00"},
        "aggregate": {"recall@10": 0.5, "ndcg@10": 0.4},
        "n": 2,
        "per_query": {
            "q1": {"status": "scored", "metrics": {"recall@10": 1.0, "ndcg@10": 0.8}, "ranking": ["a"],
                   "tags": ["standard"], "baseline": {"recall@10": 1.0, "ndcg@10": 0.8}},
            "q2": {"status": "scored", "metrics": {"recall@10": 0.0, "ndcg@10": 0.0}, "ranking": ["z"],
                   "tags": ["paraphrase"], "baseline": {"recall@10": 1.0, "ndcg@10": 1.0}},
        },
        "comparison": {
            "n": 2, "n_common": 2, "passed": False,
            "aggregate": [
                {"metric": "recall@10", "now": 0.5, "now_common": 0.5, "baseline": 1.0, "delta": -0.5,
                 "tolerance": 0.0, "min": None},
                {"metric": "ndcg@10", "now": 0.4, "now_common": 0.4, "baseline": 0.9, "delta": -0.5,
                 "tolerance": None, "min": None},
            ],
            "strata": {"paraphrase": {"n": 1, "now": {"recall@10": 0.0, "ndcg@10": 0.0},
                                      "baseline": {"recall@10": 1.0, "ndcg@10": 1.0}},
                       "standard": {"n": 1, "now": {"recall@10": 1.0, "ndcg@10": 0.8},
                                    "baseline": {"recall@10": 1.0, "ndcg@10": 0.8}}},
            "regressed": [{"qid": "q2", "question": HOSTILE,
                           "drops": [{"metric": "recall@10", "baseline": 1.0, "now": 0.0, "delta": -1.0,
                                      "tolerance": 0.0, "exceeded": True}],
                           "gold": [["gold-doc", 2]], "returned": ["z<b>"], "explains": ["bm25 #1 (3.2)"]}],
            "gates": [{"name": "recall@10", "passed": False, "message": "recall@10 fell -0.5000"}],
        },
    }


def test_query_text_is_escaped_and_nothing_is_fetched() -> None:
    page = render_html(artifact())
    assert "<script>" not in page  # the hostile query text stays text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "z&lt;b&gt;" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # no external asset
    assert "http" not in page


def test_delta_chart_draws_one_bar_per_compared_query() -> None:
    page = render_html(artifact())
    chart = page.split("Per-query change in recall@10", 1)[1].split("</svg>", 1)[0]
    assert chart.count("<rect") == 2
    assert "q2: -1.0000" in chart and "q1: +0.0000" in chart
    assert "Gate failed" in page and "gold-doc (2)" in page


@pytest.mark.slow
def test_report_opens_in_headless_chromium_without_console_errors(tmp_path: Path) -> None:
    # Control: the detector sees a console error when a page has one.
    bad = tmp_path / "bad.html"
    bad.write_text('<!doctype html><html><body><script>console.error("boom")</script></body></html>')
    assert any("boom" in line for line in console_errors(browse(bad, tmp_path / "bad.png")))

    page = tmp_path / "report.html"
    page.write_text(render_html(artifact()), encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    log = browse(page, shot)
    assert console_errors(log) == []
    assert shot.stat().st_size > 10_000  # a rendered page, not an empty canvas


def test_p_values_and_tolerances_read_as_in_the_terminal() -> None:
    """The page showed p 0.000 and an allowed drop of 0.0 where the terminal says <0.001 and 0."""
    data = artifact()
    data["comparison"]["aggregate"][0]["stats"] = {"n": 2, "mean": -0.5, "ci95": [-1.0, 0.0], "p_value": 0.0002,
                                                   "detectable": None}
    page = render_html(data)
    assert '<td class="num">&lt;0.001</td>' in page
    assert "<td>0</td>" in page and "<td>0.0</td>" not in page
