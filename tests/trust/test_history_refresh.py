"""What `ragmetrics history --fail-on-drift` takes for a baseline refresh.

A refresh answers the drift before it, so it must be one: a run judged against another
baseline (other numbers, a new ``created``). The file's bytes are not the baseline: a
trailing newline, CRLF line endings from git, or a note sealed with ``--reseal`` leave
every number as it was, and must not clear a current drift; neither may a hand edit of an
artifact's ``_meta.baseline.sha256``.

The series comes from real ``pytest --rag-eval --rag-report`` sessions: MRR@10 with an
allowed drop of 0.1 goes 1, 11/12, 10/12 over three nights (two steps of 1/12, a fall of
1/6): a drift.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from pytest_ragmetrics.cli import main
from pytest_ragmetrics.files import dumps_stable
from pytest_ragmetrics.gate.artifact import seal_artifact
from ragproject import GOOD
from trust_helpers import TrustProject

_SERIES: dict[str, Path] = {}


def _set_created(path: Path, night: int) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["_meta"]["created"] = f"2026-03-{night:02d}T03:00:00+00:00"
    path.write_text(dumps_stable(seal_artifact(data)), encoding="utf-8")  # as if it had run that night


def _night(project: TrustProject, nights: Path, n: int) -> None:
    path = nights / f"night-{n}.json"
    result = project.run(f"--rag-report={path}")
    assert path.exists(), result.stdout.str()[-2000:]
    _set_created(path, n)


@pytest.fixture
def drifting(project: TrustProject, tmp_path_factory: pytest.TempPathFactory) -> tuple[TrustProject, Path]:
    """The project after three drifting nights, and the folder of their artifacts."""
    if not _SERIES:
        root = tmp_path_factory.mktemp("series")
        (root / "nights").mkdir()
        project.ini(rag_metrics="recall@10 mrr@10")
        project.thresholds({"mrr@10_tolerance": 0.1})
        project.make_baseline()
        _night(project, root / "nights", 1)
        project.answer(q_001=["off-topic", *GOOD["q-001"]])
        _night(project, root / "nights", 2)
        project.answer(q_002=["off-topic", *GOOD["q-002"]])
        _night(project, root / "nights", 3)
        for name in ("pytest.ini", "rankings.json"):
            shutil.copy(project.path / name, root / name)
        shutil.copytree(project.path / "baselines", root / "baselines")
        _SERIES["root"] = root
    root = _SERIES["root"]
    for name in ("pytest.ini", "rankings.json"):
        shutil.copy(root / name, project.path / name)
    shutil.copytree(root / "baselines", project.path / "baselines", dirs_exist_ok=True)
    nights = project.path / "nights"
    shutil.copytree(root / "nights", nights)
    return project, nights


def _newline(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\n")


def _crlf(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))


def _resealed_note(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["_meta"]["_note"] = "reviewed"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    assert main(["baseline", "--reseal", str(path)]) == 0


@pytest.mark.parametrize("touch", [_newline, _crlf, _resealed_note], ids=["newline", "crlf", "reseal-note"])
def test_touching_the_baseline_bytes_is_no_refresh(drifting: tuple[TrustProject, Path],
                                                   touch: Callable[[Path], None],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    project, nights = drifting
    assert main(["history", str(nights), "--fail-on-drift"]) == 1
    before = project.baseline_path.read_bytes()
    touch(project.baseline_path)
    assert project.baseline_path.read_bytes() != before
    _night(project, nights, 4)  # the same rankings, judged against the same numbers
    sha = [json.loads((nights / f"night-{n}.json").read_text())["_meta"]["baseline"]["sha256"] for n in (3, 4)]
    assert sha[0] != sha[1]  # the bytes differ; the baseline does not
    capsys.readouterr()
    assert main(["history", str(nights), "--fail-on-drift", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["current_drift"] is True
    assert [r["refresh"] for r in data["groups"][0]["runs"]] == [None] * 4
    # a real refresh (new numbers, a new created) still answers the drift
    project.make_baseline("--rag-reason", "the drift is accepted")
    refreshed = json.loads(project.baseline_path.read_text(encoding="utf-8"))
    refreshed["_meta"]["created"] = "2026-03-05T02:00:00+00:00"  # runs here take less than its second
    project.baseline_path.write_text(json.dumps(refreshed), encoding="utf-8")  # created is not sealed
    _night(project, nights, 5)
    capsys.readouterr()
    assert main(["history", str(nights), "--fail-on-drift", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["groups"][0]["runs"][-1]["refresh"].startswith("judged against a new baseline (created ")


def test_a_hand_edited_baseline_sha256_in_the_last_artifact_is_no_refresh(
        drifting: tuple[TrustProject, Path]) -> None:
    _, nights = drifting
    last = nights / "night-3.json"
    data = json.loads(last.read_text(encoding="utf-8"))
    data["_meta"]["baseline"]["sha256"] = "0" * 64
    last.write_text(dumps_stable(data), encoding="utf-8")
    assert main(["history", str(nights), "--fail-on-drift"]) == 2  # the seal no longer matches
    data["_meta"].pop("seal")  # and unsealed, as an older version's file: the same created is no refresh
    data["_meta"].pop("format")
    last.write_text(dumps_stable(data), encoding="utf-8")
    assert main(["history", str(nights), "--fail-on-drift"]) == 1
