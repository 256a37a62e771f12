"""Files and processes: a killed baseline update loses nothing, unwritable paths are clear
errors, concurrent index builds neither corrupt nor deadlock, a corrupt index is named
and rebuilt, and xdist workers never write.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from once import once_per_run  # tests/once.py
from ragproject import GOLDEN, rag_summary
from trust_helpers import FAST, TrustProject, assert_usage_error, clean_env, no_traceback, snapshot

from pytest_ragmetrics.gate.baseline import load_baseline

# ------------------------------------------------------------------ unwritable paths


def _blocked(project: TrustProject, where: str) -> str:
    """A path that cannot be written even as root: under a regular file, or under /proc."""
    if where == "under-a-file":
        (project.path / "notadir").write_text("a file where a folder should be\n")
        return "notadir/baseline.json"
    return "/proc/ragmetrics-trust/baseline.json"


@pytest.mark.parametrize("where", ["under-a-file", "under-proc"])
def test_an_unwritable_baseline_path_is_a_clear_error(baselined: TrustProject, where: str) -> None:
    target = _blocked(baselined, where)
    before = snapshot(baselined.path)
    result = baselined.run("--rag-update-baseline", f"--rag-baseline={target}")
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert f"cannot write the baseline {Path(baselined.path, target) if where == 'under-a-file' else target}" \
        in summary
    assert "the previous file, if any, is untouched" in summary
    if where == "under-a-file":
        assert f"{baselined.path / 'notadir'} is a file, not a folder" in summary
    assert {k: v for k, v in snapshot(baselined.path).items() if k != "calls.log"} == \
        {k: v for k, v in before.items() if k != "calls.log"}


@pytest.mark.parametrize("flag, what", [("--rag-report", "run report"), ("--rag-html", "HTML report")])
def test_an_unwritable_report_path_is_a_clear_error(baselined: TrustProject, flag: str, what: str) -> None:
    (baselined.path / "notadir").write_text("x\n")
    result = baselined.run(f"{flag}=notadir/out")
    no_traceback(result.stdout.str() + result.stderr.str())
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # every query passed; the missing report fails the run
    summary = rag_summary(result)
    assert "All gates passed" in summary
    assert f"ERROR: cannot write the {what} {baselined.path / 'notadir' / 'out'}: " \
           f"{baselined.path / 'notadir'} is a file, not a folder; the run fails, as a report it was asked " \
           "to write is missing" in summary


def test_reports_are_written_atomically(baselined: TrustProject) -> None:
    """No temp file is left beside a report; an old report is replaced whole."""
    (baselined.path / "out").mkdir()
    assert baselined.run("--rag-report=out/run.json", "--rag-html=out/run.html").ret == pytest.ExitCode.OK
    assert baselined.run("--rag-report=out/run.json", "--rag-html=out/run.html").ret == pytest.ExitCode.OK
    assert sorted(p.name for p in (baselined.path / "out").iterdir()) == ["run.html", "run.json"]
    assert json.loads((baselined.path / "out" / "run.json").read_text())["n"] == len(GOLDEN)


def test_a_symlinked_baseline_is_updated_through_the_link(baselined: TrustProject) -> None:
    """Reads follow a symlinked baselines/baseline.json; the update replaced the link with a
    regular file, so the file it pointed to (shared, or kept elsewhere) silently went stale."""
    shared = baselined.path / "shared"
    shared.mkdir()
    target = shared / "baseline.json"
    baselined.baseline_path.rename(target)
    baselined.baseline_path.symlink_to(Path("..") / "shared" / "baseline.json")
    baselined.answer(q_002=["chain-lube", "noise-doc"])  # recall 1 -> 0.5: the refresh changes something
    result = baselined.run("--rag-update-baseline", "--rag-reason", "q-002 finds half its gold")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert baselined.baseline_path.is_symlink()
    assert os.readlink(baselined.baseline_path) == os.path.join("..", "shared", "baseline.json")
    assert json.loads(target.read_text())["per_query"]["q-002"]["recall@10"] == 0.5
    assert sorted(p.name for p in shared.iterdir()) == ["baseline.json"]  # no temp file left behind
    assert sorted(p.name for p in baselined.baseline_path.parent.iterdir()) == ["baseline.json"]
    assert baselined.run().ret == pytest.ExitCode.OK  # and the next run reads the new numbers through it


# ------------------------------------------------- special files are written in place


def test_a_fifo_report_path_gets_the_artifact_and_stays_a_fifo(baselined: TrustProject) -> None:
    """A named pipe read by another process: renaming a temp file over it left the reader with nothing."""
    fifo = baselined.path / "report.pipe"
    os.mkfifo(fifo)
    spare = baselined.path / "report.pipe.link"
    os.link(fifo, spare)  # lets the cleanup release a reader stuck on a FIFO no longer at its path
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        result = baselined.run(f"--rag-report={fifo}")
        reader.join(timeout=60)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
        assert got and json.loads(got[0])["n"] == len(GOLDEN)
    finally:
        if reader.is_alive():
            os.close(os.open(spare, os.O_WRONLY | os.O_NONBLOCK))


def test_a_report_to_dev_stdout_redirected_to_a_file_keeps_the_log(baselined: TrustProject) -> None:
    """``pytest --rag-report=/dev/stdout > log.txt``: /dev/stdout leads to log.txt, a regular
    file, which the rename replaced with the JSON alone. The report is added to the log."""
    log = baselined.path.parent / f"{baselined.path.name}-log.txt"
    with open(log, "w", encoding="utf-8") as out:
        done = subprocess.run([sys.executable, "-m", "pytest", "--rag-eval", "-rA", *FAST, "--rag-report=/dev/stdout"],
                              cwd=baselined.path, env=clean_env(), stdout=out, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    text = log.read_text(encoding="utf-8")
    no_traceback(text + done.stderr)
    assert done.returncode == 0, text[-3000:]
    assert "test session starts" in text.splitlines()[0]
    assert "All gates passed" in text and " passed" in text.splitlines()[-1]
    found = re.search(r"\{\n  \"_meta\".*?^\}\n", text, flags=re.M | re.S)  # after the progress line
    assert found, text[-3000:]
    assert json.loads(found.group(0))["n"] == len(GOLDEN)
    assert text.index("test session starts") < found.start() < text.index("All gates passed")


def test_a_character_device_report_path_stays_a_device(baselined: TrustProject) -> None:
    device = baselined.path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    except PermissionError:
        pytest.skip("creating a character device needs root (CAP_MKNOD)")
    result = baselined.run(f"--rag-report={device}", "--rag-html=null")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert os.lstat(device).st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in baselined.path.iterdir() if p.name.startswith((".null", "null"))) == ["null"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("regressed", [False, True])
def test_a_report_to_dev_full_is_an_error_and_dev_full_stays_a_device(baselined: TrustProject,
                                                                      regressed: bool) -> None:
    if regressed:
        baselined.answer(q_002=["chain-lube", "noise-doc"])  # recall@10 1 -> 0.5
    result = baselined.run("--rag-report=/dev/full")
    no_traceback(result.stdout.str() + result.stderr.str())
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert ("All gates passed" not in summary) is regressed
    assert "ERROR: cannot write the run report /dev/full: No space left on device; the run fails, as a report " \
           "it was asked to write is missing" in summary


# ------------------------------------------------- what the written files look like


@pytest.fixture
def umask_027() -> Any:
    """A umask other than the common 022, so a mode that ignores it shows (pytester runs in-process)."""
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_written_files_get_the_mode_of_an_ordinary_write(project: TrustProject, umask_027: None) -> None:
    """Not the temp file's private 0600: a baseline committed, or an artifact uploaded, by
    another user or CI step must be readable as any file the user writes."""
    assert project.run("--rag-update-baseline").ret == pytest.ExitCode.OK
    assert project.run("--rag-report=out/run.json", "--rag-html=out/run.html").ret == pytest.ExitCode.OK
    for path in (project.baseline_path, project.path / "out" / "run.json", project.path / "out" / "run.html"):
        assert oct(path.stat().st_mode & 0o777) == oct(0o640), path
    project.baseline_path.chmod(0o664)  # a rewrite keeps the file's own mode, as open(path, "w") would
    assert project.run("--rag-update-baseline").ret == pytest.ExitCode.OK
    assert oct(project.baseline_path.stat().st_mode & 0o777) == oct(0o664)


def test_the_folder_is_fsynced_after_the_rename(project: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without it a power cut after the rename can bring back the old baseline."""
    events: list[tuple[str, Any]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        events.append(("fsync-dir" if stat.S_ISDIR(st.st_mode) else "fsync-file", st.st_ino))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append(("replace", Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert project.run("--rag-update-baseline").ret == pytest.ExitCode.OK
    folder = project.baseline_path.parent.stat().st_ino
    at = events.index(("replace", "baseline.json"))
    assert events[at - 1][0] == "fsync-file"
    assert events[at + 1] == ("fsync-dir", folder)


@pytest.mark.parametrize("spelling", ["space", "equals"])
def test_a_report_path_flag_behaves_the_same_on_every_run(
        baselined: TrustProject, tmp_path_factory: pytest.TempPathFactory, spelling: str) -> None:
    """pytest takes ``--rag-report /elsewhere/run.json`` for a test path once the file exists
    (moving the rootdir off the ini file), so the space form outside the current directory is
    refused on every run, the first one included; the ``=`` form works on every run."""
    target = tmp_path_factory.mktemp("elsewhere") / "run.json"
    args = ["--rag-report", str(target)] if spelling == "space" else [f"--rag-report={target}"]
    for _ in range(2):
        result = baselined.run(*args)
        if spelling == "space":
            assert_usage_error(result, f"write it as --rag-report={target}")
            assert not target.exists()
        else:
            assert result.ret == pytest.ExitCode.OK, result.stdout.str()
            assert json.loads(target.read_text())["n"] == len(GOLDEN)


def test_a_report_path_inside_the_project_may_follow_a_space(baselined: TrustProject) -> None:
    for _ in range(2):
        assert baselined.run("--rag-report", "out/run.json").ret == pytest.ExitCode.OK
        assert json.loads((baselined.path / "out" / "run.json").read_text())["n"] == len(GOLDEN)


def test_the_step_summary_named_twice_is_written_once(baselined: TrustProject, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = baselined.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    (baselined.path / "sub").mkdir()
    result = baselined.run("--rag-markdown=./sub/../step_summary.md")
    assert result.ret == pytest.ExitCode.OK
    assert summary.read_text().count("## Retrieval gate: passed") == 1


@pytest.mark.parametrize("which", ["step-summary", "rag-markdown"])
def test_an_unwritable_markdown_summary_warns_and_keeps_the_verdict(
        baselined: TrustProject, monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    (baselined.path / "notadir").write_text("a file where a folder should be\n")
    target = baselined.path / "notadir" / "summary.md"
    if which == "step-summary":
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
        result = baselined.run()
    else:
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
        result = baselined.run(f"--rag-markdown={target}")
    no_traceback(result.stdout.str() + result.stderr.str())
    assert result.ret == pytest.ExitCode.OK  # the gate is green; the summary is presentation
    summary = rag_summary(result)
    assert "All gates passed" in summary
    assert (f"WARNING: cannot append the Markdown summary to {target}: {baselined.path / 'notadir'} is a file, "
            "not a folder; the verdict above stands") in summary
    # a failing gate still fails, and says why
    baselined.answer(q_005=["noise-doc"])
    result = baselined.run(*([] if which == "step-summary" else [f"--rag-markdown={target}"]))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "RETRIEVAL GATE FAILED" in rag_summary(result)


# ------------------------------------------------------- killing a baseline update

#: Appended to the project's conftest in the kill tests: with RAGMETRICS_TEST_PAUSE set,
#: the baseline write stops at that point, writes a marker, and waits to be killed.
#: Only this test project is instrumented; the package has no such hook.
PAUSE_CONFTEST = r'''

import os as _os
import time as _time

import pytest_ragmetrics.files as _files_module

_PAUSE = _os.environ.get("RAGMETRICS_TEST_PAUSE")


def _paused(where):
    (HERE / "paused").write_text(where, encoding="utf-8")
    while True:
        _time.sleep(1)


class _HalfThenPause:
    def __init__(self, fh):
        self._fh = fh

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._fh.__exit__(*exc)

    def write(self, text):
        half = len(text) // 2
        self._fh.write(text[:half])
        self._fh.flush()
        _os.fsync(self._fh.fileno())
        _paused("mid-write")

    def __getattr__(self, name):
        return getattr(self._fh, name)


class _OsProxy:
    def __getattr__(self, name):
        return getattr(_os, name)

    def fdopen(self, *args, **kwargs):
        fh = _os.fdopen(*args, **kwargs)
        return _HalfThenPause(fh) if _PAUSE == "mid-write" else fh

    def replace(self, src, dst):
        if _PAUSE == "before-rename":
            _paused("before-rename")
        return _os.replace(src, dst)


if _PAUSE:
    _files_module.os = _OsProxy()
'''


def _update(project: TrustProject, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", "--rag-eval", "--rag-update-baseline",
                             "--rag-reason=a degraded retriever, measured on purpose", *FAST, "-q"],
                            cwd=project.path, env=clean_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)


def _degrade(project: TrustProject) -> None:
    """Change every third answer, so a complete new baseline differs from the old one."""
    project.answer(**{qid.replace("-", "_"): ["noise-doc"] for qid in list(project.answers)[::3]})


def _baseline_state(project: TrustProject, old: bytes) -> str:
    """'old' if the baseline is byte-for-byte the old one, 'new' if it is a whole, valid new one."""
    data = project.baseline_path.read_bytes()
    if data == old:
        return "old"
    load_baseline(project.baseline_path)  # raises on anything partial or malformed
    assert json.loads(data)["per_query"] != json.loads(old)["per_query"]
    return "new"


@pytest.mark.parametrize("point", ["mid-write", "before-rename"])
def test_sigkill_during_the_baseline_write_leaves_the_old_one(project: TrustProject, point: str) -> None:
    project.conftest_text += PAUSE_CONFTEST
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")
    project.make_baseline()
    old = project.baseline_path.read_bytes()
    _degrade(project)
    proc = _update(project, RAGMETRICS_TEST_PAUSE=point)
    try:
        deadline = time.monotonic() + 120
        while not (project.path / "paused").exists():
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        temp = [p for p in project.baseline_path.parent.iterdir() if p.name.endswith(".tmp")]
        assert len(temp) == 1 and temp[0].name.startswith(".baseline.json.")  # the new text is on its way
        if point == "mid-write":
            assert 0 < temp[0].stat().st_size < len(old)
    finally:
        _kill(proc)
    assert project.baseline_path.read_bytes() == old
    # The killed writer's hidden temp file is all that is left behind; the next run ignores it.
    (project.path / "paused").unlink()
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and "RETRIEVAL GATE FAILED" in rag_summary(result)


#: Appended to the project's conftest: the rankings file is parsed once, when the process loads the conftest.
RANKINGS_READ_ONCE = '''

_rankings = json.loads((HERE / "rankings.json").read_text(encoding="utf-8"))


def _answer(query):
    return [tuple(x) if isinstance(x, list) else x for x in _rankings[query]]
'''


@pytest.mark.slow
def test_sigkill_at_random_moments_of_a_large_update_never_loses_the_baseline(project: TrustProject) -> None:
    """2,000 queries; the update is killed at random moments over its whole run (start-up,
    collection, retrieval, the write; half of the kills near the end). Afterwards the
    baseline is always the old file, byte for byte, or a whole valid new one; never a mix,
    never truncated. (The write itself is hit deterministically by the test above.)"""
    records = [{"id": f"q-{i:05d}", "question": f"question {i}", "gold_chunks": [f"doc-{i}", f"doc-{i + 1}"],
                "tags": ["standard"]} for i in range(2000)]
    project.answers = {r["id"]: [f"doc-{i}#1-2", "noise", f"doc-{i + 1}"] for i, r in enumerate(records)}
    project.golden(records)
    # the project's retriever parses the whole rankings file at every query, which made 2,000 of them half of
    # each update's time; read once per process, the answers are the same and the plugin's run is untouched
    project.conftest_text += RANKINGS_READ_ONCE
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")
    first = _update(project)  # the old baseline, by the kind of process the kills hit: in-process, 2,000
    out, _ = first.communicate(timeout=600)  # items cost twice as much CPU (pytester records every report)
    assert first.returncode == 0, out[-3000:]
    old = project.baseline_path.read_bytes()
    _degrade(project)

    started = time.monotonic()
    full = _update(project)
    full.communicate(timeout=600)
    span = time.monotonic() - started  # how long a whole update takes here, to spread the kills over
    assert full.returncode == 0 and _baseline_state(project, old) == "new"
    project.baseline_path.write_bytes(old)

    rng = random.Random(6)
    states = []
    for i in range(12):
        proc = _update(project)
        # every other kill lands near the end of the run, where the baseline is written
        time.sleep(rng.uniform(0.0, span) if i % 2 else rng.uniform(0.85 * span, 1.05 * span))
        _kill(proc)
        states.append(_baseline_state(project, old))
        project.baseline_path.write_bytes(old)
    print(f"update took {span:.1f} s; baseline after each kill: {states}")
    assert set(states) <= {"old", "new"}
    leftovers = [p.name for p in project.baseline_path.parent.iterdir()
                 if p.name not in ("baseline.json", "thresholds.json") and not p.name.endswith(".tmp")]
    assert leftovers == []


# ------------------------------------------------------------------ the stack's index

INDEX_SCRIPT = r'''
import json, os, sys, time
import numpy as np
from pytest_ragmetrics.stack.index import VectorIndex

data_dir, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pause = os.environ.get("PAUSE_AFTER_FIRST_BATCH")
rng = np.random.default_rng(0)
vecs = rng.normal(size=(n, 16)).astype(np.float32)
vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
row = {f"text {i}": vecs[i] for i in range(n)}
batches = 0


def embed(texts):
    global batches
    batches += 1
    if pause and batches == 2:  # one batch is in the collection: a half-written index
        open(pause, "w").write("paused")
        while True:
            time.sleep(1)
    return np.stack([row[t] for t in texts])


index = VectorIndex("trust", {"model": "random-16"}, data_dir=data_dir, batch_size=500)
rebuilt = index.sync([f"c{i}" for i in range(n)], [f"text {i}" for i in range(n)], "corpus-1", embed)
found = index.query(vecs[:20], 5)
json.dump({"rebuilt": rebuilt, "count": index.count(), "found": [[c for c, _ in hits] for hits in found]},
          open(out, "w"))
'''


def _index_run(tmp_path: Path, data_dir: Path, out: str, n: int = 3000, **env: str) -> subprocess.Popen[str]:
    script = tmp_path / "index_script.py"
    script.write_text(INDEX_SCRIPT, encoding="utf-8")
    return subprocess.Popen([sys.executable, str(script), str(data_dir), str(tmp_path / out), str(n)],
                            env=clean_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    return out


def _result(tmp_path: Path, name: str) -> dict[str, Any]:
    return json.loads((tmp_path / name).read_text())


@pytest.fixture(scope="session")
def whole_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[str]]]:
    """The index built whole by :data:`INDEX_SCRIPT`, and its rankings: the reference the damage tests
    compare with. Built once per test run and shared by the xdist workers: each test that damages
    an index copies the folder, never changes it, so every one starts from the same bytes a build of
    its own would have written (a process of ~1.5 s of CPU fewer per test)."""

    def build(folder: Path) -> list[list[str]]:
        _finish(_index_run(folder, folder / "index", "whole.json"))
        return _result(folder, "whole.json")["found"]

    folder, found = once_per_run(tmp_path_factory, "trust-whole-index", build)
    return folder / "index", found


def _copy_index(whole: tuple[Path, list[list[str]]], data_dir: Path) -> list[list[str]]:
    """A copy of the whole index at ``data_dir`` (as a CI cache restores it: new mtimes, same bytes); its rankings."""
    shutil.copytree(whole[0], data_dir)
    return whole[1]


@pytest.mark.slow
def test_two_processes_building_one_index_dir_neither_corrupt_nor_deadlock(tmp_path: Path) -> None:
    """Raw chroma: two fresh PersistentClients on one folder race creating its tables
    ("table collections already exists"); the build lock now covers opening too."""
    for round_ in range(3):
        data_dir = tmp_path / f"index-{round_}"
        procs = [_index_run(tmp_path, data_dir, f"r{round_}-{i}.json") for i in range(2)]
        for proc in procs:
            _finish(proc)  # each has 300 s; a deadlock fails here instead of hanging
        a, b = (_result(tmp_path, f"r{round_}-{i}.json") for i in range(2))
        assert a["count"] == b["count"] == 3000
        assert a["found"] == b["found"]
        assert sorted([a["rebuilt"], b["rebuilt"]]) == [False, True]  # one built, the other reused it
        _finish(_index_run(tmp_path, data_dir, "again.json"))
        again = _result(tmp_path, "again.json")
        assert again["rebuilt"] is False and again["found"] == a["found"]


@pytest.mark.slow
def test_a_build_killed_half_way_is_rebuilt(tmp_path: Path, whole_index: tuple[Path, list[list[str]]]) -> None:
    expected = whole_index[1]
    half = tmp_path / "index-half"
    marker = tmp_path / "paused"
    proc = _index_run(tmp_path, half, "never.json", PAUSE_AFTER_FIRST_BATCH=str(marker))
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)  # mid-build, holding the build lock
    proc.communicate(timeout=60)
    _finish(_index_run(tmp_path, half, "after.json"))  # the lock died with its holder: no deadlock
    after = _result(tmp_path, "after.json")
    assert after["rebuilt"] is True and after["count"] == 3000 and after["found"] == expected


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate-sqlite", "garbage-sqlite", "empty-sqlite", "garbage-hnsw-header",
                                    "truncated-hnsw-data", "older-version-garbage-sqlite"])
def test_a_corrupt_index_is_named_and_rebuilt(tmp_path: Path, whole_index: tuple[Path, list[list[str]]],
                                              damage: str) -> None:
    """The manifest is checked before chromadb opens the folder: whatever the damage, the file is
    named and the folder rebuilt (an older version's folder, without a manifest, is rebuilt too)."""
    data_dir = tmp_path / "index"
    expected = _copy_index(whole_index, data_dir)
    sqlite = data_dir / "chroma.sqlite3"
    segment = next(p for p in data_dir.iterdir() if p.is_dir())
    rng = random.Random(damage)
    if damage == "truncate-sqlite":
        with open(sqlite, "r+b") as fh:
            fh.truncate(sqlite.stat().st_size // 3)
    elif damage in ("garbage-sqlite", "older-version-garbage-sqlite"):
        sqlite.write_bytes(rng.randbytes(sqlite.stat().st_size))
        if damage.startswith("older"):
            (data_dir / "manifest.json").unlink()
    elif damage == "empty-sqlite":
        sqlite.write_bytes(b"")
    elif damage == "garbage-hnsw-header":
        (segment / "header.bin").write_bytes(rng.randbytes((segment / "header.bin").stat().st_size))
    else:
        with open(segment / "data_level0.bin", "r+b") as fh:
            fh.truncate(1000)
    proc = _index_run(tmp_path, data_dir, "after.json")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    after = _result(tmp_path, "after.json")
    assert after["count"] == 3000 and after["found"] == expected
    assert after["rebuilt"] is True
    (note,) = [line for line in out.splitlines() if "RagMetricsWarning" in line]
    assert f"the vector index in {data_dir}" in note
    named = {"truncate-sqlite": "chroma.sqlite3 is", "garbage-sqlite": "chroma.sqlite3 has sha256",
             "empty-sqlite": "chroma.sqlite3 is 0 bytes", "garbage-hnsw-header": "/header.bin has sha256",
             "truncated-hnsw-data": "/data_level0.bin is 1,000 bytes",
             "older-version-garbage-sqlite": "it had no manifest"}[damage]
    assert named in note
    _finish(_index_run(tmp_path, data_dir, "again.json"))  # and the next open trusts it again
    assert _result(tmp_path, "again.json")["rebuilt"] is False


def _read_only(paths: list[Path]) -> list[Path]:
    """Make ``paths`` read-only for this process: ``chmod a-w``, or for root (whom the mode bits
    do not stop) the immutable flag; returns what to give back with :func:`_writable_again`."""
    if os.geteuid() != 0:
        for path in paths:
            path.chmod(path.stat().st_mode & ~0o222)
        return paths
    done: list[Path] = []
    for path in paths:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            _writable_again(done)
            pytest.skip("running as root, and chattr +i is not available here")
        done.append(path)
    return done


def _writable_again(paths: list[Path]) -> None:
    for path in paths:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(path.stat().st_mode | 0o200)


@pytest.mark.parametrize("what", ["the folder", "the folder and its files"])
def test_a_read_only_index_folder_is_said_to_be_read_only_not_corrupt(tmp_path: Path, what: str) -> None:
    """An intact index in a folder this user cannot write was reported as "may be corrupt ...
    delete it": the message now says the folder is not writable, names it and how to fix that."""
    import numpy as np

    from pytest_ragmetrics.stack.index import IndexStoreError, VectorIndex, _forget_system

    folder = tmp_path / "index"
    vectors = np.random.default_rng(0).standard_normal((50, 16)).astype(np.float32)
    ids = [f"c{i}" for i in range(50)]
    table = dict(zip(ids, vectors))
    VectorIndex("read-only-test", {"model": "random-16"}, data_dir=folder).sync(
        ids, ids, "corpus", lambda texts: np.stack([table[t] for t in texts]))
    _forget_system(folder)  # the next open reads the folder again, as a new process would
    before = snapshot(folder)
    paths = [folder] + ([p for p in folder.rglob("*")] if what.endswith("files") else [])
    locked = _read_only(paths)
    try:
        with pytest.raises(IndexStoreError) as raised:
            VectorIndex("read-only-test", {"model": "random-16"}, data_dir=folder)
    finally:
        _writable_again(locked)
    message = str(raised.value)
    assert f"the vector index folder {folder} is not writable" in message, message
    assert "corrupt" not in message and "delete" not in message
    assert f"chmod -R u+w {folder}" in message
    assert snapshot(folder) == before  # nothing in it was touched
    index = VectorIndex("read-only-test", {"model": "random-16"}, data_dir=folder)  # writable again: reused as is
    assert index.sync(ids, ids, "corpus", lambda texts: pytest.fail("rebuilt an intact index")) is False


def test_a_read_only_graph_folder_is_named_before_an_export_and_read_as_it_is(tmp_path: Path) -> None:
    """An ONNX backend whose graph is not exported yet, in a folder this user cannot write, stopped
    with a bare PermissionError on a temporary file; now the folder is named with the fix, before
    any export starts. A graph already in a read-only folder is used as it is."""
    from pytest_ragmetrics.stack._onnx import cached_graph
    from pytest_ragmetrics.stack.index_folder import IndexStoreError

    onnx = tmp_path / "onnx"
    home = onnx / "0123456789abcdef"  # the model's folder: made by its first export
    onnx.mkdir()
    for blocked in (onnx, home):  # the model's folder cannot be made; it is there, but read-only
        if blocked == home:
            home.mkdir()
        locked = _read_only([blocked])
        try:
            with pytest.raises(IndexStoreError) as raised:
                cached_graph(home, "model-int8-v1.onnx", "model-fp32-v1.onnx",
                             lambda path: pytest.fail("exported into a folder it cannot write"))
        finally:
            _writable_again(locked)
        message = str(raised.value)
        assert f"the ONNX graph folder {home} is not writable (" in message, message
        assert f"Make {blocked} writable by this user (chmod -R u+w {blocked})" in message, message
        assert "RAGMETRICS_HOME" in message
        assert [p.name for p in onnx.rglob("*")] == (["0123456789abcdef"] if blocked == home else [])

    (home / "model-fp32-v1.onnx").write_bytes(b"graph")  # exported before the folder was locked
    locked = _read_only([home])
    try:
        assert cached_graph(home, "model-fp32-v1.onnx", "model-fp32-v1.onnx",
                            lambda path: pytest.fail("exported again")) == (home / "model-fp32-v1.onnx", 0)
    finally:
        _writable_again(locked)


@pytest.mark.parametrize("what", ["a file", "a dangling symbolic link", "a symbolic link loop", "a read-only mount"])
def test_a_graph_folder_that_cannot_be_made_is_named_with_what_is_in_the_way(
    tmp_path: Path, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAGMETRICS_HOME/onnx (or onnx_dir) that is a file or a symbolic link leading nowhere, or a
    folder on a read-only mount (EROFS, not a PermissionError), stopped the backend with a bare
    FileExistsError, NotADirectoryError or OSError; now the path in the way is named with the fix."""
    import errno
    import tempfile

    from pytest_ragmetrics.stack._onnx import cached_graph
    from pytest_ragmetrics.stack.index_folder import IndexStoreError

    onnx = tmp_path / "onnx"
    if what == "a file":
        onnx.write_text("not a folder")
    elif what == "a dangling symbolic link":
        onnx.symlink_to(tmp_path / "gone")
    elif what == "a symbolic link loop":
        (tmp_path / "loop").symlink_to(onnx)
        onnx.symlink_to(tmp_path / "loop")
    else:
        onnx.mkdir()

        def read_only_mount(*args: object, **kwargs: object) -> None:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(onnx))

        monkeypatch.setattr(tempfile, "TemporaryFile", read_only_mount)
    home = onnx / "0123456789abcdef"
    with pytest.raises(IndexStoreError) as raised:
        cached_graph(home, "model-int8-v1.onnx", "model-fp32-v1.onnx",
                     lambda path: pytest.fail("exported into a folder that cannot be made"))
    message = str(raised.value)
    assert f"the ONNX graph folder {home} " in message and "RAGMETRICS_HOME (or onnx_dir)" in message, message
    if what == "a read-only mount":
        assert f"is not writable (Read-only file system: {home})" in message, message
        assert "a read-only mount a writable one" in message, message
    else:
        assert f"cannot be made: {onnx} is {'a file' if what == 'a file' else 'a symbolic link to'}" in message, message
        assert f"Remove or rename {onnx}" in message, message


@pytest.mark.parametrize("taken", ["model-fp32-v1.onnx", "model-int8-v1.onnx"])
def test_a_graph_name_taken_by_a_folder_is_named_before_an_export(tmp_path: Path, taken: str) -> None:
    """A folder where a graph belongs let the export run (about 10 s) and then failed its rename
    with a bare IsADirectoryError; a symbolic link leading nowhere there did the same."""
    from pytest_ragmetrics.stack._onnx import cached_graph
    from pytest_ragmetrics.stack.index_folder import IndexStoreError

    home = tmp_path / "0123456789abcdef"
    (home / taken).mkdir(parents=True)
    with pytest.raises(IndexStoreError) as raised:
        cached_graph(home, "model-int8-v1.onnx", "model-fp32-v1.onnx",
                     lambda path: pytest.fail("exported a graph it could not rename into place"))
    message = str(raised.value)
    assert f"the exported graph's name {home / taken} is taken by a folder" in message, message
    assert f"rm -r {home / taken}" in message and "RAGMETRICS_HOME (or onnx_dir)" in message
    (home / taken).rmdir()
    (home / taken).symlink_to(tmp_path / "gone")
    with pytest.raises(IndexStoreError, match="is taken by not a file"):
        cached_graph(home, "model-int8-v1.onnx", "model-fp32-v1.onnx", lambda path: pytest.fail("exported"))


def test_an_index_folder_on_a_read_only_mount_is_said_to_be_read_only(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only mount answers a write with EROFS, which is no PermissionError: the index folder
    on one stopped with a bare OSError; it is now named as read-only, as a folder without the
    permission is."""
    import errno
    import tempfile

    from pytest_ragmetrics.stack.index import IndexStoreError, VectorIndex

    folder = tmp_path / "index"
    folder.mkdir()

    def read_only_mount(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(folder))

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only_mount)
    with pytest.raises(IndexStoreError) as raised:
        VectorIndex("read-only-mount", {"model": "random-16"}, data_dir=folder)
    message = str(raised.value)
    assert f"the vector index folder {folder} is not writable (Read-only file system: {folder})" in message, message
    assert "a read-only mount a writable one" in message


def test_a_damaged_graph_in_a_read_only_folder_is_named_not_raised_as_a_bare_permission_error(tmp_path: Path) -> None:
    """A graph onnxruntime cannot load is removed and exported again; in a folder this user cannot
    write the removal failed with a bare PermissionError. Now the graph, why it is removed and the
    fix are named, and the file is left as it was."""
    from pytest_ragmetrics.stack._onnx import open_graph
    from pytest_ragmetrics.stack.index_folder import IndexStoreError

    class InvalidProtobuf(Exception):
        pass

    InvalidProtobuf.__module__ = "onnxruntime.capi.onnxruntime_pybind11_state"  # where onnxruntime's errors live

    def load(path: Path) -> None:
        raise InvalidProtobuf(f"Load model from {path} failed:Protobuf parsing failed.")

    home = tmp_path / "0123456789abcdef"
    home.mkdir()
    graph = home / "model-int8-v1.onnx"
    graph.write_bytes(b"")  # emptied by a half-restored cache
    locked = _read_only([home])
    try:
        with pytest.raises(IndexStoreError) as raised:
            open_graph(lambda: graph, load)
    finally:
        _writable_again(locked)
    message = str(raised.value)
    assert f"the exported graph {graph} could not be read (InvalidProtobuf: " in message, message
    assert "cannot be removed to export it again (" in message and f"{home} is not writable" in message, message
    assert f"rm {graph}" in message and "RAGMETRICS_HOME (or onnx_dir)" in message, message
    assert graph.read_bytes() == b""


def _tiny_graph(path: Path) -> None:
    """A float32 graph of one MatMul, which int8 quantisation rewrites: an export without torch."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 16, "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_full_disk_during_an_export_is_named_and_keeps_the_float32_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while quantising was taken for a damaged float32 graph: the intact graph was
    deleted and exported again (torch, ~10 s), then the run stopped on a bare OSError or protobuf
    DecodeError. Now the disk is named, and the float32 graph stays for the next run. Quantising
    leaves nothing beside the graphs (onnxruntime's ``-inferred.onnx`` copy goes elsewhere)."""
    import errno

    import onnxruntime.quantization as quantization

    from pytest_ragmetrics.stack._onnx import cached_graph
    from pytest_ragmetrics.stack.index_folder import IndexStoreError

    home = tmp_path / "0123456789abcdef"
    exports: list[Path] = []

    def export(path: Path) -> None:
        exports.append(path)
        _tiny_graph(path)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real = quantization.quantize_dynamic
    monkeypatch.setattr(quantization, "quantize_dynamic", full_disk)
    with pytest.raises(IndexStoreError) as raised:
        cached_graph(home, "model-int8-v1.onnx", "model-fp32-v1.onnx", export)
    assert f"no room to export the ONNX graph into {home} (No space left on device)" in str(raised.value)
    assert "RAGMETRICS_HOME (or onnx_dir)" in str(raised.value)
    assert exports == [home / "model-fp32-v1.onnx"] and [p.name for p in home.iterdir()] == ["model-fp32-v1.onnx"]

    monkeypatch.setattr(quantization, "quantize_dynamic", real)
    assert cached_graph(home, "model-int8-v1.onnx", "model-fp32-v1.onnx", export) == (home / "model-int8-v1.onnx", 1)
    assert len(exports) == 1 and sorted(p.name for p in home.iterdir()) == ["model-fp32-v1.onnx", "model-int8-v1.onnx"]

    (home / "model-int8-v1.onnx").unlink()
    (home / "model-fp32-v1.onnx").write_bytes(b"")  # an emptied float32 graph is damage: exported again
    with pytest.warns(Warning, match="could not be read"):
        assert cached_graph(home, "model-int8-v1.onnx", "model-fp32-v1.onnx", export)[1] == 2
    with pytest.raises(IndexStoreError, match="no room to export the ONNX graph into"):
        cached_graph(tmp_path / "other", "model-fp32-v1.onnx", "model-fp32-v1.onnx", full_disk)


@pytest.mark.parametrize("backend", ["onnx-int8", "e5-onnx-int8"])
def test_a_read_only_home_holding_the_graphs_is_read_and_a_home_that_is_a_file_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """RAGMETRICS_HOME restored read-only with its graphs but without the .gitignore the stack writes
    into it stopped the ONNX backends with a bare PermissionError on that .gitignore, and a home
    that is a file with a bare FileExistsError. The graphs are now read as they are, and the file
    is named by the graph folder's check."""
    from pytest_ragmetrics.stack import _e5onnx, _onnx
    from pytest_ragmetrics.stack.index_folder import IndexStoreError
    from pytest_ragmetrics.stack.models import load_model

    def make_only(make: Any, open_: Any) -> Path:  # the graph's path, without onnxruntime loading it
        return make()

    monkeypatch.setattr(_onnx, "open_graph", make_only)
    monkeypatch.setattr(_e5onnx, "open_graph", make_only)
    files = _e5onnx._FILES if backend.startswith("e5") else _onnx._FILES
    home = tmp_path / "home"
    graph = home / "onnx" / "0123456789abcdef" / files[backend]
    graph.parent.mkdir(parents=True)
    graph.write_bytes(b"graph")
    monkeypatch.setenv("RAGMETRICS_HOME", str(home))
    locked = _read_only([home, graph.parent.parent, graph.parent])
    try:
        assert load_model(backend, str(tmp_path), "0123456789abcdef", "cpu", None) == graph
    finally:
        _writable_again(locked)
    assert not (home / ".gitignore").exists()

    monkeypatch.setenv("RAGMETRICS_HOME", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(IndexStoreError, match=f"cannot be made: {tmp_path / 'a-file'} is a file"):
        load_model(backend, str(tmp_path), "0123456789abcdef", "cpu", None)


def test_temporary_graphs_of_killed_exports_are_removed_at_the_next_export(tmp_path: Path) -> None:
    """kill -9 during an export leaves its temporary graph (about 90 MB for MiniLM): the next export
    removes those untouched for an hour, and leaves a younger one (another export may be writing it)."""
    from pytest_ragmetrics.stack._onnx import STALE_TEMPORARY_SECONDS, cached_graph

    home = tmp_path / "0123456789abcdef"
    home.mkdir()
    stale, fresh = home / ".model-fp32-v1.onnx.k1ll3d.tmp", home / ".model-fp32-v1.onnx.wr1t1ng.tmp"
    other = home / "notes.tmp"  # not a graph's temporary file
    for path in (stale, fresh, other):
        path.write_bytes(b"half a graph")
    old = time.time() - STALE_TEMPORARY_SECONDS - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))

    def export(path: Path) -> None:
        path.write_bytes(b"graph")

    assert cached_graph(home, "model-fp32-v1.onnx", "model-fp32-v1.onnx", export) == (home / "model-fp32-v1.onnx", 1)
    assert sorted(p.name for p in home.iterdir()) == [fresh.name, "model-fp32-v1.onnx", other.name]


@pytest.mark.slow
def test_two_processes_building_the_real_stack_into_one_dir(tmp_path: Path) -> None:
    """The reference retriever end to end (model, embedding cache, chroma, BM25): two
    processes build the same small corpus into one data dir at once and agree."""
    corpus = Path(__file__).resolve().parents[1] / "stack" / "data" / "car_corpus.jsonl"
    script = tmp_path / "stack_script.py"
    script.write_text(r'''
import json, sys
from pytest_ragmetrics.stack import Retriever
r = Retriever(sys.argv[1], data_dir=sys.argv[2], chunk_size=120, overlap=20, top_k=5, fetch_k=10)
stats = r.build()
hits = r.search_batch(["my battery is dead", "brake pads squeal", "change the oil", "tire pressure low"])
json.dump({"rebuilt": stats["vector_index_rebuilt"], "hits": [[h.id for h in hs] for hs in hits]},
          open(sys.argv[3], "w"))
''', encoding="utf-8")
    env = clean_env(RAGMETRICS_HOME=str(tmp_path / "home"))
    procs = [subprocess.Popen([sys.executable, str(script), str(corpus), str(tmp_path / "data"),
                               str(tmp_path / f"s{i}.json")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(2)]
    for proc in procs:
        _finish(proc)
    a, b = (json.loads((tmp_path / f"s{i}.json").read_text()) for i in range(2))
    assert a["hits"] == b["hits"] and all(len(h) == 5 for h in a["hits"])
    assert sorted([a["rebuilt"], b["rebuilt"]]) == [False, True]



@pytest.mark.slow
def test_a_tampered_pickle_in_the_index_is_never_executed(tmp_path: Path,
                                                         whole_index: tuple[Path, list[list[str]]]) -> None:
    """chroma persists HNSW metadata as ``index_metadata.pickle``. It is read by chroma's
    Rust code (serde-pickle), which builds no objects: a payload that would run a command
    under Python's pickle is refused as data, and the collection is rebuilt."""
    import pickle  # only to write the hostile payload; the package never imports it

    data_dir = tmp_path / "index"
    expected = _copy_index(whole_index, data_dir)
    marker = tmp_path / "PWNED"

    class Payload:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    segments = [p for p in data_dir.iterdir() if (p / "index_metadata.pickle").exists()]
    assert segments, "chroma no longer writes index_metadata.pickle: revisit this test"
    (segments[0] / "index_metadata.pickle").write_bytes(pickle.dumps(Payload()))
    _finish(_index_run(tmp_path, data_dir, "after.json"))
    assert not marker.exists()
    after = _result(tmp_path, "after.json")
    assert after["rebuilt"] is True and after["found"] == expected


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a /proc where no file can be created")
def test_an_unwritable_report_names_the_path_asked_for_not_the_temp_file(baselined: TrustProject) -> None:
    result = baselined.run("--rag-report=/proc/ragmetrics-run.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = rag_summary(result)
    assert "ERROR: cannot write the run report /proc/ragmetrics-run.json: No such file or directory; " \
           "the run fails, as a report it was asked to write is missing" in summary
    assert ".tmp" not in summary
