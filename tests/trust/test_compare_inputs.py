"""What `ragmetrics compare` takes on trust from its two artifacts, and what it must not.

Each test starts from a real failing run: a ``pytest --rag-eval`` session whose retriever lost
the gold documents of four queries, its artifact (B) beside the good run's (A). An edit of B or
A that `compare --fail-on-regression` would pass turns a red run green without anyone deciding
so; each such edit must be refused (exit 2) or still fail (exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.cli import main as ragmetrics
from trust_helpers import TrustProject

#: a failing run: four of six queries lost their gold documents
LOST = {"q_002": ["noise-doc"], "q_004": ["rim-wear"], "q_005": [], "q_006": ["chain-lube"]}
REGRESSED = ["q-002", "q-004", "q-005", "q-006"]

_RUNS: dict[str, bytes] = {}


@pytest.fixture
def runs(project: TrustProject, tmp_path: Path) -> tuple[Path, Path]:
    """good.json (A) and bad.json (B): the artifacts of a passing run and of a failing one, gated
    with the built-in default thresholds (made by real sessions once, then copied)."""
    if not _RUNS:
        project.make_baseline("--rag-report=good.json")
        project.answer(**LOST)
        result = project.run("--rag-report=bad.json")
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-2000:]
        for name in ("good.json", "bad.json", "golden.yaml"):
            _RUNS[name] = (project.path / name).read_bytes()
    out = tmp_path / "runs"
    out.mkdir(exist_ok=True)
    for name, data in _RUNS.items():
        (out / name).write_bytes(data)
    return out / "good.json", out / "bad.json"


@pytest.fixture
def golden(runs: tuple[Path, Path]) -> Path:
    return runs[0].parent / "golden.yaml"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def save(path: Path, data: dict[str, Any]) -> Path:
    """Write an edited artifact without its seal and format, as an older version's file would be: what is checked
    here is the edit itself (a sealed file so edited is refused by its seal before anything else)."""
    data["_meta"].pop("seal", None)
    data["_meta"].pop("format", None)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def mark_unscorable(data: dict[str, Any], qids: list[str], digests: bool = True) -> dict[str, Any]:
    """``qids`` marked unscorable, with ``aggregate`` and ``n`` recomputed so the schema check holds."""
    for qid in qids:
        entry = data["per_query"][qid]
        entry.update(status="unscorable", metrics=None)
        if not digests:
            del entry["_judgments"]
    scored = [e["metrics"] for e in data["per_query"].values() if e["status"] == "scored"]
    data["aggregate"] = {m: sum(s[m] for s in scored) / len(scored) for m in data["aggregate"]}
    data["n"] = len(scored)
    return data


def compare(*args: str | Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = ragmetrics(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# ----------------------------------------------------------------- unscorable claims


def test_b_marking_its_regressed_queries_unscorable_is_refused(runs: tuple[Path, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    assert compare(good, bad, "--fail-on-regression", capsys=capsys)[0] == 1
    edited = save(bad.with_name("edited.json"), mark_unscorable(load(bad), REGRESSED))
    code, _, err = compare(good, edited, "--fail-on-regression", capsys=capsys)
    assert code == 2, err
    assert str(edited) in err
    assert "per_query.q-002: unscorable in B but scored in A under the same judgments: B was edited" in err


def test_a_marking_the_queries_b_lost_unscorable_is_refused(runs: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    edited = save(good.with_name("edited.json"), mark_unscorable(load(good), REGRESSED))
    code, _, err = compare(edited, bad, "--fail-on-regression", capsys=capsys)
    assert code == 2, err
    assert f"{edited}, per_query.q-002: unscorable in A but scored in B under the same judgments: A was edited" in err


def test_an_unscorable_claim_without_its_judgments_digest_is_refused(runs: tuple[Path, Path],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    edited = save(bad.with_name("edited.json"), mark_unscorable(load(bad), REGRESSED, digests=False))
    code, _, err = compare(good, edited, "--fail-on-regression", capsys=capsys)
    assert code == 2, err
    assert "per_query.q-002: unscorable in B but scored in A with no judgments digest (_judgments) on B" in err


def test_an_unscorable_query_under_changed_judgments_is_a_judgments_mismatch(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Other labels can make a query unscorable: compare reports the changed judgments, as before."""
    good, bad = runs
    data = mark_unscorable(load(bad), ["q-002"])
    data["per_query"]["q-002"]["_judgments"] = "0" * 16
    edited = save(bad.with_name("edited.json"), data)
    code, _, err = compare(good, edited, "--fail-on-regression", capsys=capsys)
    assert code == 2, err
    assert "judgments or text changed for 1 queries between A and B: q-002" in err
    assert "was edited" not in err


def test_with_golden_unscorable_is_judged_from_the_golden_set(runs: tuple[Path, Path], golden: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    edited = save(bad.with_name("edited.json"), mark_unscorable(load(bad), REGRESSED, digests=False))
    data = load(good)
    for entry in data["per_query"].values():
        del entry["_judgments"]
    reference = save(good.with_name("reference.json"), data)
    code, _, err = compare(reference, edited, "--golden", golden, "--fail-on-regression", capsys=capsys)
    assert code == 2, err
    assert (f"{edited}, per_query.q-002: B says unscorable, but {golden} judges 'chain-clean' relevant at "
            "relevance level 1: B was edited") in err


# ------------------------------------------------------------------ recorded thresholds


def loosen(data: dict[str, Any], source: str = "defaults") -> dict[str, Any]:
    data["_meta"]["thresholds"]["source"] = source
    data["_meta"]["thresholds"]["values"].update({"recall@10_tolerance": 0.99, "recall@10_query_tolerance": 0.99})
    return data


@pytest.mark.parametrize("side", ["A", "B"])
def test_recorded_defaults_that_are_not_the_defaults_are_refused(runs: tuple[Path, Path], side: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    if side == "A":  # B records none, so A's are read
        data = load(bad)
        del data["_meta"]["thresholds"]
        bad = save(bad.with_name("bare.json"), data)
    target = good if side == "A" else bad
    edited = save(target.with_name("loose.json"), loosen(load(target)))
    pair = (edited, bad) if side == "A" else (good, edited)
    code, _, err = compare(*pair, "--fail-on-regression", capsys=capsys)
    assert code == 2, err
    assert f"{edited}" in err
    assert "_meta.thresholds says defaults but holds 'recall@10_query_tolerance': 0.99; the built-in default is 0.0" in err


@pytest.mark.parametrize("loose", ["A", "B"])
def test_both_recorded_thresholds_gate_with_the_stricter(runs: tuple[Path, Path], loose: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    target = good if loose == "A" else bad
    edited = save(target.with_name("loose.json"), loosen(load(target), source="baselines/thresholds.json"))
    pair = (edited, bad) if loose == "A" else (good, edited)
    code, out, _ = compare(*pair, "--fail-on-regression", capsys=capsys)
    assert code == 1, out
    assert "Thresholds: the stricter of A's and B's recorded thresholds (A: " in out
    assert "allowed drop 0" in out


def test_a_thresholds_file_wins_over_the_recorded_ones(runs: tuple[Path, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"recall@10_tolerance": 0.99, "recall@10_query_tolerance": None}), encoding="utf-8")
    code, out, _ = compare(good, bad, "--thresholds", path, "--fail-on-regression", capsys=capsys)
    assert code == 0, out
    assert f"Thresholds: {path}\n" in out


# ------------------------------------------------------------------ the exit code


def test_a_failed_gate_without_fail_on_regression_says_why_it_exits_0(runs: tuple[Path, Path],
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    code, out, _ = compare(good, bad, capsys=capsys)
    assert code == 0
    assert "RETRIEVAL GATE FAILED" in out
    assert out.rstrip().endswith("exit 0: pass --fail-on-regression to exit 1 on a failed gate")
    code, out, _ = compare(good, good, capsys=capsys)
    assert code == 0 and "exit 0:" not in out


def test_a_failed_gate_under_fail_on_regression_false_says_why_it_exits_0(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"fail_on_regression": False}), encoding="utf-8")
    code, out, _ = compare(good, bad, "--thresholds", path, "--fail-on-regression", capsys=capsys)
    assert code == 0
    assert out.rstrip().endswith(f"exit 0: fail_on_regression is false in the thresholds ({path})")


# ------------------------------------------------------------ metrics only one side measured


_GATED: dict[str, bytes] = {}


@pytest.fixture
def mrr_gated(project: TrustProject, tmp_path: Path) -> tuple[Path, Path]:
    """A (gated on MRR@10 by its thresholds file) and B (the same good rankings, measured without
    MRR@10 and gated with the defaults): real sessions, made once, then copied."""
    if not _GATED:
        project.thresholds({"mrr@10_tolerance": 0.02})
        project.make_baseline("--rag-report=a.json")
        (project.path / "baselines" / "thresholds.json").unlink()
        project.ini(rag_metrics="recall@10 hit_rate@10")
        result = project.run("--rag-report=b.json", "--rag-accept-mismatch")
        assert (project.path / "b.json").exists(), result.stdout.str()[-2000:]
        for name in ("a.json", "b.json"):
            _GATED[name] = (project.path / name).read_bytes()
    for name, data in _GATED.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path / "a.json", tmp_path / "b.json"


def test_a_metric_a_gates_and_b_did_not_measure_fails_its_gate(mrr_gated: tuple[Path, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    a, b = mrr_gated
    assert load(b)["_meta"]["measurement"]["metrics"] == ["recall@10", "hit_rate@10"]
    code, out, err = compare(a, b, "--fail-on-regression", capsys=capsys)
    assert code == 1, out + err
    assert f"gate mrr@10: mrr@10 cannot be compared: B ({b}) holds no mrr@10 (it measured recall@10, hit_rate@10)" in out
    assert "All gates passed" not in out
    code, out, _ = compare(a, b, "--fail-on-regression", "--format", "json", capsys=capsys)
    assert code == 1 and json.loads(out)["not_compared"] == {"only_in_A": ["mrr@10", "ndcg@10"], "only_in_B": []}


def _without_mrr(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with MRR@10 deleted wherever it is recorded: as if never measured."""
    data["_meta"]["measurement"]["metrics"].remove("mrr@10")
    del data["aggregate"]["mrr@10"]
    values = data["_meta"]["thresholds"]["values"]
    for key in [k for k in values if k.startswith("mrr@10_")]:
        del values[key]
    for entry in data["per_query"].values():
        for key in ("metrics", "baseline"):
            if isinstance(entry.get(key), dict):
                entry[key].pop("mrr@10", None)
    return data


def test_a_gated_metric_deleted_from_b_by_hand_fails_its_gate(mrr_gated: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = mrr_gated
    assert compare(a, a, "--fail-on-regression", capsys=capsys)[0] == 0
    edited = save(a.with_name("edited.json"), _without_mrr(load(a)))
    code, out, err = compare(a, edited, "--fail-on-regression", capsys=capsys)
    assert code == 1, out + err
    assert "gate mrr@10: mrr@10 cannot be compared: B" in out


def test_an_ungated_metric_b_lacks_is_named(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    good, _ = runs
    edited = save(good.with_name("edited.json"), _without_mrr(load(good)))
    code, out, _ = compare(good, edited, "--fail-on-regression", capsys=capsys)
    assert code == 0, out  # the defaults gate recall only
    assert "Not compared: mrr@10 (measured by A, not by B; not gated)" in out
    code, out, _ = compare(edited, good, "--fail-on-regression", capsys=capsys)
    assert "Not compared: mrr@10 (measured by B, not by A)" in out


def test_a_metric_asked_for_that_b_lacks_is_no_traceback(mrr_gated: tuple[Path, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    a, b = mrr_gated
    code, out, _ = compare(a, b, "-m", "recall@10", "-m", "mrr@10", "--fail-on-regression", capsys=capsys)
    assert code == 1, out
    assert "gate mrr@10: mrr@10 cannot be compared" in out
    code, _, err = compare(a, b, "-m", "ndcg@20", capsys=capsys)
    assert code == 2 and f"neither {a} nor {b} measured ndcg@20" in err


# ------------------------------------------------------------------ recorded metrics


def forge_good_metrics(bad: dict[str, Any], good: dict[str, Any]) -> dict[str, Any]:
    """B's regressed queries given A's metrics (rankings left as B recorded them), means recomputed."""
    for qid in REGRESSED:
        bad["per_query"][qid]["metrics"] = dict(good["per_query"][qid]["metrics"])
    scored = [e["metrics"] for e in bad["per_query"].values() if e["status"] == "scored"]
    bad["aggregate"] = {m: sum(s[m] for s in scored) / len(scored) for m in bad["aggregate"]}
    return bad


def test_with_golden_metrics_the_ranking_does_not_give_are_refused(runs: tuple[Path, Path], golden: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    forged = save(bad.with_name("forged.json"), forge_good_metrics(load(bad), load(good)))
    code, out, _ = compare(good, forged, "--fail-on-regression", capsys=capsys)
    assert code == 0, out  # the numbers, as recorded, pass
    assert "Per-query metrics are taken as recorded in A and B; pass --golden to recompute them" in out
    code, _, err = compare(good, forged, "--golden", golden, "--fail-on-regression", capsys=capsys)
    assert code == 2, err
    assert (f"{forged}, per_query.q-002: B records hit_rate@10 = 1.0, but the ranking it recorded scores 0.0 "
            f"against {golden}: B was edited") in err
    assert "B was edited" in err
    # the runs as written pass the check: a failing B still fails, a good A still passes
    assert compare(good, bad, "--golden", golden, "--fail-on-regression", capsys=capsys)[0] == 1
    code, out, _ = compare(good, good, "--golden", golden, "--fail-on-regression", capsys=capsys)
    assert code == 0 and "taken as recorded" not in out


def test_a_golden_entry_that_is_not_an_object_is_refused_by_the_html_report(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = runs
    data = load(bad)
    data["_meta"]["golden"] = [1]
    edited = save(bad.with_name("edited.json"), data)
    code, _, err = compare(good, edited, "--html", tmp_path / "report.html", capsys=capsys)
    assert code == 2, err
    assert f"{edited}: _meta.golden is [1]; expected an object" in err
    assert not (tmp_path / "report.html").exists()
