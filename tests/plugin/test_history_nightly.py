"""``ragmetrics history`` on artifacts written by real ``pytest --rag-eval --rag-report`` runs.

One small project (ragproject.py) is run ten times as a nightly job would be, its
retriever's rankings rewritten between runs:

- the baseline has q-005 and q-006 with their gold document at rank 2 (MRR 1/2 each);
- nights 1-5 rise, then slide: q-005 and q-006 are fixed (nights 2, 3), then q-001 and
  q-002 fall to rank 2 (nights 4, 5). MRR@10, allowed drop 0.1: 5/6, 5.5/6, 1, 5.5/6,
  5/6. Each step moves 1/12 = 0.0833 (within 0.1), and night 5 is back at the baseline,
  so every aggregate gate on MRR passes, yet nights 3 -> 5 fell 1/6 = 0.1667: drift;
- night 3 also changes the retriever's describe() (a marker, not a new group);
- night 6 refreshes the baseline (--rag-update-baseline), night 7 slips once more
  (q-003 to rank 2, 1/12, no drift), night 8 errors on q-006 (a fall of 1/6 in one
  step: beyond the allowed drop, the gate's to judge, not drift);
- q-004 loses one of its two gold documents on nights 2, 4, 5, 6, 7 (recall 1/2, a
  regression against the first baseline, not against the refreshed one): verdicts
  ok, regressed, ok, regressed, regressed | ok, ok, ok: three changes counted, the one
  at the refresh (night 6) not;
- night 9 is measured with linear gain, night 10 with k 5, night 11 after q-001's judgments
  changed (all three --rag-accept-mismatch): three groups of their own, never in night 1-8's
  series.

Runs take seconds apart, so each artifact's ``_meta.created`` is rewritten to 03:00 on
day N of March 2026 (only that value: everything else is as the plugin wrote it); the
tie-break test rewrites ``created`` and ``git_commit`` the same way. The artifacts are
built once per test process and copied for each test that reads them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from browser import browse, console_errors, dump_dom
from pytest_ragmetrics.cli import main
from pytest_ragmetrics.files import dumps_stable
from pytest_ragmetrics.report.trend_html import render_trend_html
from pytest_ragmetrics.tools.history import build_history, load_artifacts
from ragproject import GOOD, RagProject, set_created

REPO = Path(__file__).resolve().parents[2]
HOSTILE_TAG = '<script>alert("tag")</script>'
HOSTILE_NOTE = "<img src=x onerror=alert(1)> | </td>"
METRICS = ["recall@10", "hit_rate@10", "mrr@10", "ndcg@10"]


def day(n: int) -> str:
    return f"2026-03-{n:02d}T03:00:00+00:00"


def rank_2(qid: str) -> list[str]:
    return ["off-topic", *GOOD[qid]]


ONE_GOLD = ["derailleur"]  # q-004 without shifter-cable: recall 1/2, MRR still 1


def _build(project: RagProject, root: Path) -> Path:
    """Run the nights into ``root/nights``; keep the last baseline as ``root/baseline.json``."""
    out = root / "nights"
    out.mkdir()
    project.ini(rag_metrics=" ".join(METRICS))
    project.edit_query("q-004", tags=["standard", HOSTILE_TAG])
    project.thresholds({"mrr@10_tolerance": 0.1})
    project.answer(q_005=rank_2("q-005"), q_006=rank_2("q-006"))
    project.make_baseline()

    def night(n: int, *args: str, expect: int | None = None) -> None:
        path = out / f"night-{n:02d}.json"
        result = project.run(f"--rag-report={path}", *args)
        if expect is not None:
            assert result.ret == expect, result.stdout.str()
        assert path.exists(), result.stdout.str()
        set_created(path, day(n))

    night(1, expect=0)
    project.answer(q_005=GOOD["q-005"], q_004=ONE_GOLD)
    night(2, expect=1)  # q-004 regressed (recall), the recall gate fails
    project.answer(q_006=GOOD["q-006"], q_004=GOOD["q-004"])
    project.retriever(describe={"name": "json-retriever", "version": 2, "note": HOSTILE_NOTE})
    night(3, expect=0)
    project.answer(q_001=rank_2("q-001"), q_004=ONE_GOLD)
    night(4, expect=1)
    project.answer(q_002=rank_2("q-002"))
    night(5, expect=1)
    night(6, "--rag-update-baseline", "--rag-reason", "q-001, q-002 and q-004 traded for speed", expect=0)
    project.answer(q_003=rank_2("q-003"))
    night(7, expect=0)
    project.answer(q_004=GOOD["q-004"], q_006={"raise": "index shard offline"})
    night(8, expect=1)
    night(9, "--rag-gain", "linear", "--rag-accept-mismatch")
    night(10, "--rag-k", "5", "--rag-accept-mismatch")
    project.edit_query("q-001", gold_chunks=["tire-repair", "tube-patch"])
    night(11, "--rag-accept-mismatch")
    shutil.copy(project.baseline_path, root / "baseline.json")
    return root


_BUILT: dict[str, Path] = {}


@pytest.fixture
def nights(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    """A folder with night-01.json … night-11.json (a fresh copy for each test)."""
    if "root" not in _BUILT:
        _BUILT["root"] = _build(RagProject(pytester), tmp_path_factory.mktemp("history"))
    copy = tmp_path / "nights"
    shutil.copytree(_BUILT["root"] / "nights", copy)
    return copy


def elements_and_fetching_attributes(page: str) -> tuple[list[str], list[str]]:
    """Every element name in ``page``, and every attribute that would make a browser fetch
    (``src``, ``href``, ``xlink:href``, ``srcset``, ``action``, ``poster``, ``data``)."""
    import html.parser

    class Parser(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.fetching: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)
            self.fetching += [f"{tag} {name}={value}" for name, value in attrs
                              if name in {"src", "href", "xlink:href", "srcset", "action", "poster", "data"}]

    parser = Parser()
    parser.feed(page)
    return parser.tags, parser.fetching


def history_json(*args: str, capsys: pytest.CaptureFixture[str], code: int = 0) -> dict[str, Any]:
    assert main(["history", *args, "--format", "json"]) == code
    return json.loads(capsys.readouterr().out)


def first_group(data: dict[str, Any]) -> dict[str, Any]:
    group = data["groups"][0]
    assert group["group"] == 1
    return group


# ------------------------------------------------------------------ the series


def test_runs_are_ordered_and_grouped_by_how_they_were_measured(nights: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    shuffled = [str(nights / f"night-{n:02d}.json") for n in (7, 2, 10, 1, 5, 11, 9, 3, 8, 4, 6)]
    data = history_json(*shuffled, capsys=capsys)
    assert data["n_artifacts"] == 11
    groups = data["groups"]
    # the largest group first, then by most recent run (night 11, new judgments; night 10, k 5; night 9)
    assert [[Path(r["path"]).name for r in g["runs"]] for g in groups] == [
        [f"night-{n:02d}.json" for n in range(1, 9)], ["night-11.json"], ["night-10.json"], ["night-09.json"]]
    assert [r["index"] for r in groups[0]["runs"]] == list(range(1, 9))
    assert groups[0]["differs"] == []
    assert groups[1]["differs"] == ["judgments or text changed for 1 query: q-001"]
    assert groups[2]["differs"] == ["k (results asked per query): group 1 10, group 3 5"]
    assert groups[3]["differs"] == ["gain: group 1 'exponential', group 4 'linear'"]
    assert groups[0]["measured"]["k"] == 10 and groups[2]["measured"]["k"] == 5
    assert groups[1]["measured"]["golden_sha256"] != groups[0]["measured"]["golden_sha256"]
    # a folder reads the same as its files
    assert history_json(str(nights), capsys=capsys) == data


def test_the_text_names_the_groups_and_what_differs(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", str(nights)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("ragmetrics history: 11 run artifacts in 4 groups measured differently "
                           "(never mixed in one series)")
    assert "== Group 3: 1 run, 2026-03-10 03:00 ==" in text
    assert ("Not comparable with group 1, so never in its series: k (results asked per query): "
            "group 1 10, group 3 5") in text
    assert "Files: " + str(nights / "night-10.json") in text


def test_means_overall_and_per_tag_are_the_gates(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = first_group(history_json(str(nights), capsys=capsys))["runs"]
    mrr = [r["aggregate"]["mrr@10"] for r in runs]
    assert mrr == pytest.approx([5 / 6, 5.5 / 6, 1.0, 5.5 / 6, 5 / 6, 5 / 6, 4.5 / 6, 3.5 / 6], abs=1e-12)
    recall = [r["aggregate"]["recall@10"] for r in runs]
    assert recall == pytest.approx([1, 5.5 / 6, 1, 5.5 / 6, 5.5 / 6, 5.5 / 6, 5.5 / 6, 5 / 6], abs=1e-12)
    assert runs[7]["n"] == 6  # the errored query counts, as 0
    # paraphrase = q-003, q-005, q-006: night 1 MRR (1 + 1/2 + 1/2) / 3; night 8 (1/2 + 1 + 0) / 3
    assert runs[0]["tags"]["paraphrase"]["n"] == 3
    assert runs[0]["tags"]["paraphrase"]["means"]["mrr@10"] == pytest.approx(2 / 3, abs=1e-12)
    assert runs[7]["tags"]["paraphrase"]["means"]["mrr@10"] == pytest.approx(0.5, abs=1e-12)
    # the same numbers as each artifact's own aggregate and comparison.strata
    for r in runs:
        artifact = json.loads(Path(r["path"]).read_text())
        assert r["aggregate"] == artifact["aggregate"]
        assert {t: s["means"] for t, s in r["tags"].items()} == {
            t: s["now"] for t, s in artifact["comparison"]["strata"].items()}
    assert runs[1]["delta"]["mrr@10"] == pytest.approx(0.5 / 6, abs=1e-12)
    assert runs[3]["delta"]["mrr@10"] == pytest.approx(-0.5 / 6, abs=1e-12)
    # a one-step fall beyond the allowed drop is marked (recall's is 0; MRR's night 8 fell 1/6 > 0.1)
    assert [r["beyond"] for r in runs] == [[], ["recall@10"], [], ["recall@10"], [], [], [],
                                           ["recall@10", "mrr@10"]]
    assert runs[0]["tolerance"] == {"recall@10": 0.0, "mrr@10": 0.1}


def test_baseline_refresh_and_retriever_change_are_marked(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = first_group(history_json(str(nights), capsys=capsys))["runs"]
    assert [r["refresh"] is not None for r in runs] == [False] * 5 + [True, False, False]
    assert runs[5]["refresh"] == "this run wrote a new baseline (--rag-update-baseline)"
    assert runs[5]["baseline"]["updated"] is True
    assert runs[6]["baseline"]["sha256"] == runs[5]["baseline"]["sha256"] != runs[4]["baseline"]["sha256"]
    assert [r["segment"] for r in runs] == [1] * 5 + [2] * 3
    assert [bool(r["retriever_changes"]) for r in runs] == [False, False, True] + [False] * 5
    assert runs[2]["retriever_changes"] == ["version: 1 -> 2", f"note: (absent) -> {HOSTILE_NOTE!r}"]
    assert {r["verdicts"]["error"] for r in runs[:7]} == {0} and runs[7]["verdicts"]["error"] == 1


def test_a_refresh_is_found_from_per_query_baseline_values_when_no_sha_is_recorded(
        nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Artifacts written before ``_meta.baseline`` existed: the per-query baseline values tell."""
    for path in nights.glob("night-0[1-8].json"):
        data = json.loads(path.read_text())
        del data["_meta"]["baseline"]
        del data["_meta"]["seal"]  # nor a seal or format
        del data["_meta"]["format"]
        path.write_text(dumps_stable(data))
    runs = first_group(history_json(str(nights), capsys=capsys))["runs"]
    # night 6 (the update) records no comparison; night 7 is the first judged by new values
    assert [r["refresh"] for r in runs] == [None] * 6 + ["judged against new baseline values", None]
    assert [r["segment"] for r in runs] == [1] * 6 + [2] * 2


# ------------------------------------------------------------------ drift


def test_slow_drift_is_flagged_with_its_window_move_and_tolerance(nights: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    group = first_group(history_json(str(nights), capsys=capsys))
    # by hand: MRR@10 1 (night 3) -> 5.5/6 -> 5/6 (night 5); steps 1/12 each, within 0.1; total 1/6 > 0.1.
    # recall@10 (allowed drop 0) never drifts: any fall is a step beyond it. ndcg and hit rate are not gated.
    assert group["drift"] == [{
        "metric": "mrr@10", "start": 3, "end": 5, "start_created": day(3), "end_created": day(5),
        "start_value": 1.0, "end_value": pytest.approx(5 / 6, abs=1e-12), "move": pytest.approx(-1 / 6, abs=1e-12),
        "tolerance": 0.1, "steps": 2, "largest_step": pytest.approx(-1 / 12, abs=1e-12), "segment": 1,
        "current": False}]
    # every run of the slide passed its MRR gate: the drift is what the gate could not see
    for n in (3, 4, 5):
        comparison = json.loads((nights / f"night-{n:02d}.json").read_text())["comparison"]
        assert [g["passed"] for g in comparison["gates"] if g["name"] == "mrr@10"] == [True]


def test_fail_on_drift_fails_while_the_drift_is_in_the_latest_baseline_period(
        nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first_five = [str(nights / f"night-{n:02d}.json") for n in range(1, 6)]
    data = history_json(*first_five, "--fail-on-drift", capsys=capsys, code=1)
    assert data["current_drift"] is True and first_group(data)["drift"][0]["current"] is True
    assert main(["history", *first_five]) == 0  # without the flag the history only reports it
    assert "DRIFT mrr@10: runs #3 -> #5 (2026-03-03 03:00 -> 2026-03-05 03:00): 1.0000 -> 0.8333 (-0.1667) " \
           "over 2 steps (the largest -0.0833); allowed drop 0.1 [current: fails --fail-on-drift]" \
           in capsys.readouterr().out
    # after the refresh (night 6) the drift is history: still reported, no longer failing
    data = history_json(str(nights), "--fail-on-drift", capsys=capsys, code=0)
    assert data["drift_flagged"] is True and data["current_drift"] is False


def test_a_newer_run_measured_differently_does_not_clear_a_drift(nights: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Night 9 (linear gain) starts a group of its own after the drift of nights 3-5: no refresh has
    answered the drift, so --fail-on-drift still fails (a false pass would be the worst outcome)."""
    runs = [str(nights / f"night-{n:02d}.json") for n in (1, 2, 3, 4, 5, 9)]
    data = history_json(*runs, "--fail-on-drift", capsys=capsys, code=1)
    assert data["current_drift"] is True
    assert [d["current"] for g in data["groups"] for d in g["drift"]] == [True]


def test_a_one_step_fall_beyond_the_allowed_drop_is_not_drift(nights: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Nights 6-8: 5/6 -> 4.5/6 (within 0.1) -> 3.5/6 (a fall of 1/6 in one step): the gate's, not drift."""
    runs = [str(nights / f"night-{n:02d}.json") for n in (6, 7, 8)]
    group = first_group(history_json(*runs, "--fail-on-drift", capsys=capsys))
    assert group["drift"] == []
    assert group["runs"][2]["beyond"] == ["recall@10", "mrr@10"]


# ------------------------------------------------------------------ flaky queries


def test_flaky_queries_are_listed_with_their_flips(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    group = first_group(history_json(str(nights), capsys=capsys))
    assert group["flaky"] == [{
        "qid": "q-004", "n_flips": 3, "runs": 8,
        "flips": [
            {"run": 2, "created": day(2), "path": str(nights / "night-02.json"), "before": "ok", "after": "regressed"},
            {"run": 3, "created": day(3), "path": str(nights / "night-03.json"), "before": "regressed", "after": "ok"},
            {"run": 4, "created": day(4), "path": str(nights / "night-04.json"), "before": "ok", "after": "regressed"},
        ]}]  # regressed -> ok at night 6 is the refresh's, not counted
    # one change (q-006: ok -> error on night 8) shows with --min-flips 1
    once = first_group(history_json(str(nights), "--min-flips", "1", capsys=capsys))["flaky"]
    assert [(f["qid"], f["n_flips"]) for f in once] == [("q-004", 3), ("q-006", 1)]
    assert once[1]["flips"][0]["before"] == "ok" and once[1]["flips"][0]["after"] == "error"
    assert main(["history", str(nights)]) == 0
    assert ("  q-004: 3 changes in 8 runs: #2 2026-03-02 03:00 ok -> regressed; #3 2026-03-03 03:00 regressed -> ok; "
            "#4 2026-03-04 03:00 ok -> regressed") in capsys.readouterr().out


def test_markdown_renders_as_text_with_whole_tables(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """For a job summary: a renderer (markdown-it, html on, as GitHub's) sees the hostile tag and
    retriever note as text, the runs table whole, and the note after it as a paragraph."""
    import markdown_it

    assert main(["history", *(str(nights / f"night-{n:02d}.json") for n in range(1, 9)), "--format",
                 "markdown"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# Retrieval history: 8 run artifacts in 1 group\n")
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").render(text)
    tags, fetching = elements_and_fetching_attributes(rendered)
    assert not {"script", "img"} & set(tags) and fetching == []
    assert tags.count("table") == 2  # runs, and per tag
    assert tags.count("tr") == (1 + 8) + (1 + 4)
    assert "&lt;script&gt;alert(&quot;tag&quot;)&lt;/script&gt;" in rendered
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered
    assert "<p>Δ: change from the run before" in rendered


# ------------------------------------------------------------------ the JSON


def test_json_keys_are_the_documented_ones(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = history_json(str(nights), capsys=capsys)
    assert set(data) == {"n_artifacts", "skipped", "min_flips", "drift_flagged", "current_drift", "groups"}
    group = data["groups"][0]
    assert set(group) == {"group", "measured", "metrics", "tags", "differs", "runs", "drift", "flaky"}
    assert set(group["measured"]) == {"metrics", "relevance_level", "gain", "id_separator", "dedup", "k", "subset",
                                      "golden_source", "golden_sha256", "n_queries"}
    assert group["metrics"] == METRICS
    assert group["tags"] == sorted(["standard", "smoke", "paraphrase", HOSTILE_TAG])
    assert set(group["runs"][0]) == {"index", "path", "created", "git_commit", "retriever", "n", "aggregate",
                                     "delta", "beyond", "tolerance", "tags", "verdicts", "passed", "baseline",
                                     "refresh", "retriever_changes", "segment", "stale_labels", "pooled",
                                     "no_answer", "false_retrieval_rate"}
    assert group["runs"][0]["verdicts"] == {"ok": 6, "regressed": 0, "error": 0, "unscorable": 0}
    assert group["runs"][1]["verdicts"] == {"ok": 5, "regressed": 1, "error": 0, "unscorable": 0}
    assert [r["passed"] for r in group["runs"]] == [True, False, True, False, False, None, True, False]
    assert set(group["drift"][0]) == {"metric", "start", "end", "start_created", "end_created", "start_value",
                                      "end_value", "move", "tolerance", "steps", "largest_step", "segment", "current"}
    assert set(group["flaky"][0]) == {"qid", "n_flips", "runs", "flips"}
    assert set(group["flaky"][0]["flips"][0]) == {"run", "created", "path", "before", "after"}
    # the documented list in docs/cli.md names every key
    doc = (REPO / "docs" / "cli.md").read_text(encoding="utf-8").split("## history", 1)[1].split("\n## ", 1)[0]
    for key in [*data, *group, *group["runs"][0], *group["drift"][0], *group["flaky"][0]]:
        assert f"`{key}`" in doc, key


# ------------------------------------------------------------------ bad input


def test_a_file_that_is_not_a_run_artifact_is_named(nights: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = nights / "baseline.json"
    shutil.copy(_BUILT["root"] / "baseline.json", baseline)  # the refreshed baseline of night 6
    assert main(["history", str(nights)]) == 2
    err = capsys.readouterr().err
    assert f"ragmetrics history: error: {baseline}: not a run artifact: it is a baseline (no comparison)" in err
    # --skip-bad warns and reads the rest
    data = history_json(str(nights), "--skip-bad", capsys=capsys)
    assert data["n_artifacts"] == 11
    assert data["skipped"] == [{"path": str(baseline), "problem": data["skipped"][0]["problem"]}]
    assert data["skipped"][0]["problem"].startswith("not a run artifact: it is a baseline")


@pytest.mark.parametrize("content, problem", [
    ("[1, 2]", "not a run artifact: the file holds a JSON list, not an object"),
    ('{"a": 1', "line 1: not valid JSON"),
    ('{"_meta": {}, "per_query": {}, "comparison": {}, "aggregate": {}}',
     "_meta.measurement.metrics is None; expected the list of metrics the run measured"),
])
def test_malformed_files_are_refused_naming_them(tmp_path: Path, content: str, problem: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["history", str(bad)]) == 2
    assert f"{bad}{', ' if problem.startswith('line') else ': '}{problem}" in capsys.readouterr().err


def test_missing_created_and_missing_paths(nights: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    night = nights / "night-01.json"
    data = json.loads(night.read_text())
    data["_meta"]["created"] = "yesterday"
    night.write_text(dumps_stable(data))
    assert main(["history", str(night)]) == 2
    assert "_meta.created is 'yesterday'; expected an ISO-8601 time" in capsys.readouterr().err
    assert main(["history", str(tmp_path / "nope.json")]) == 2
    assert f"{tmp_path / 'nope.json'}: file not found" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["history", str(empty)]) == 2
    assert "a folder with no *.json file in it" in capsys.readouterr().err


def test_ties_in_created_are_ordered_by_commit_then_path(nights: Path) -> None:
    a, b, c = (nights / f"night-{n:02d}.json" for n in (1, 2, 3))
    set_created(a, day(1), commit="b" * 40)
    set_created(b, day(1), commit="a" * 40)
    set_created(c, day(1), commit="a" * 40)
    artifacts, _ = load_artifacts([c, a, b])
    assert [Path(x.path).name for x in artifacts] == ["night-02.json", "night-03.json", "night-01.json"]


# ------------------------------------------------------------------ the HTML page


def test_html_page_is_self_contained_and_escapes_artifact_text(nights: Path) -> None:
    artifacts, _ = load_artifacts([nights])
    page = render_trend_html(build_history(artifacts).to_dict())
    assert "<script" not in page and "<img" not in page
    tags, fetching = elements_and_fetching_attributes(page)
    assert fetching == [] and not {"script", "img", "link", "iframe", "object"} & set(tags)
    assert "&lt;script&gt;alert(&quot;tag&quot;)&lt;/script&gt;" in page  # the hostile tag, as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the hostile retriever note, as text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "http" not in page and "@import" not in page and "url(" not in page
    # one chart per metric per group, and small multiples per tag
    group_1 = page.split("<h2>Group 2", 1)[0]
    assert group_1.count('aria-label="mrr@10 over 8 runs"') == 1
    assert group_1.count("<figure>") == len(METRICS) * 4
    assert group_1.count('class="refresh"') == len(METRICS) * 5  # the big chart and four tags, per metric
    assert group_1.count('class="drift"') == 1  # MRR's window, on its big chart


@pytest.mark.slow
def test_html_page_renders_in_headless_chromium(nights: Path, tmp_path: Path) -> None:
    page = tmp_path / "trend.html"
    assert main(["history", str(nights), "--html", str(page), "--format", "json"]) == 0
    dom = dump_dom(page)
    # group 1: a chart per metric and one per metric and tag; groups 2-4 hold one run each: tables only
    assert dom.count("<svg") == len(METRICS) + len(METRICS) * 4
    assert "DRIFT mrr@10: runs #3 -&gt; #5" in dom
    # the hostile texts stayed text: an element made of them would serialise with bare quotes
    assert '<script>alert("tag")</script>' not in dom and 'onerror="' not in dom
    assert '&lt;script&gt;alert("tag")&lt;/script&gt;' in dom
    assert elements_and_fetching_attributes(dom)[1] == []  # no element points anywhere
    shot_dir = REPO / "test-artifacts"
    shot_dir.mkdir(exist_ok=True)
    shot = shot_dir / "history.png"
    assert console_errors(browse(page, shot)) == []
    assert shot.stat().st_size > 10_000  # a rendered page, not an empty canvas


def test_no_mutation_of_a_nightly_artifact_clears_a_current_drift(nights: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A property over history's input: nights 1-5 hold a current drift; delete a key, change a number, a
    key's case, insert NaN, a separator or a lone surrogate anywhere in one of them, and
    --fail-on-drift still fails (1) or refuses the file (2), never passes, never a traceback."""
    import sys

    from hypothesis import given
    from hypothesis import strategies as st

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trust"))
    from test_properties_files import PROPERTY, mutations

    first_five = [nights / f"night-{n:02d}.json" for n in range(1, 6)]
    assert main(["history", *map(str, first_five), "--fail-on-drift"]) == 1
    capsys.readouterr()
    originals = {p: p.read_text(encoding="utf-8") for p in first_five}

    @PROPERTY
    @given(which=st.integers(0, len(first_five) - 1), data=st.data())
    def check(which: int, data: Any) -> None:
        target = first_five[which]
        what, text = data.draw(mutations(json.loads(originals[target])))
        for path, original in originals.items():
            path.write_text(text if path == target else original, encoding="utf-8")
        code = main(["history", *map(str, first_five), "--fail-on-drift"])
        err = capsys.readouterr().err
        assert code in (1, 2), (target.name, what, code)
        assert "Traceback" not in err

    check()

