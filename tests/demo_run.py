"""The demo gate, cold, run once per test session and shared by the tests that check its output.

``pytest --rag-eval`` at the repository root, in a fresh ``RAGMETRICS_HOME``, loads torch and
MiniLM and builds the demo's index: about 30 s of CPU, and most of what each of those tests
cost when each ran its own. They check different things about the same session (it passes
against the committed baseline; nothing in it reaches for the network; a warm rerun, a ``-n 2``
run and a run under ``--rag-timeout`` give the same artifact), so the session runs once, under
a file lock that the xdist workers share, and each test asserts on its record. A test that
needs a built demo index, not a cold build, copies the home it leaves (``warm_demo_home``).

The run is the strictest of the ones it replaces: inside a network namespace with only a down
loopback (``unshare -n``) where the machine allows it, and with a socket guard that records
any attempt to reach another machine (``tests/trust/test_trust_safety.py`` checks both).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from once import once_per_run, shared_folder  # noqa: F401  - tests/once.py; shared_folder also importable from here

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "baselines" / "baseline.json"

GUARD = r'''
"""Loaded at start-up through PYTHONPATH: records (and refuses) any attempt to reach
another machine from Python code. The network namespace stops everything else."""
import os
import socket

_LOG = os.environ["RAGMETRICS_NET_LOG"]
_LOCAL = {None, "", "localhost", "127.0.0.1", "::1"}


def _record(what):
    with open(_LOG, "a", encoding="utf-8") as fh:
        fh.write(what + "\n")


def _host(address):
    return address[0] if isinstance(address, tuple) else address


_connect, _connect_ex, _getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo


def connect(self, address):
    if self.family != getattr(socket, "AF_UNIX", None) and _host(address) not in _LOCAL:
        _record(f"connect {address!r}")
        raise OSError(101, "network disabled by the test")
    return _connect(self, address)


def connect_ex(self, address):
    if self.family != getattr(socket, "AF_UNIX", None) and _host(address) not in _LOCAL:
        _record(f"connect_ex {address!r}")
        return 101
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if host not in _LOCAL:
        _record(f"getaddrinfo {host!r}")
        raise socket.gaierror(socket.EAI_NONAME, "network disabled by the test")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
'''


def isolation() -> list[str]:
    """A command prefix that puts the child in a network namespace of its own, if possible."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    for prefix in ([unshare, "-n"], [unshare, "-rn"]):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0:
                return prefix
        except (OSError, subprocess.SubprocessError):
            pass
    return []


def demo_env(**extra: str) -> dict[str, str]:
    """The environment of a demo session: offline model hub, no stray RAGMETRICS_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_") and k != "PYTEST_ADDOPTS"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def guarded_env(folder: Path, home: Path, log: Path) -> dict[str, str]:
    """``demo_env`` with the socket guard (written to ``folder/guard``) loaded by every Python started."""
    guard = folder / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
    return demo_env(RAGMETRICS_HOME=str(home), RAGMETRICS_NET_LOG=str(log), PYTHONPATH=str(guard),
                    ANONYMIZED_TELEMETRY="False")


@dataclass(frozen=True)
class DemoRun:
    """What the shared cold session left: its exit code and output, its run artifact (``report``),
    the network attempts its guard recorded, and its home (copy it; never change it)."""

    returncode: int
    stdout: str
    stderr: str
    report: Path
    home: Path
    network_log: str
    #: the ``unshare`` prefix it ran under; empty where the machine has no network namespaces
    isolation: list[str]
    #: ``baselines/baseline.json`` as it was before the session
    baseline_before: bytes


def cold_demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """Run the demo gate cold, once per test run (the first worker to ask runs it, the other reads it)."""

    def run(folder: Path) -> dict[str, Any]:
        home = folder / "home"
        assert not home.exists(), f"{home} is left from an interrupted run: not a cold start"
        prefix = isolation()
        before = BASELINE.read_bytes()
        proc = subprocess.run([*prefix, sys.executable, "-m", "pytest", "--rag-eval", "-p", "no:cacheprovider",
                               f"--rag-report={folder / 'run.json'}"], cwd=REPO,
                              env=guarded_env(folder, home, folder / "network.log"),
                              capture_output=True, text=True, timeout=900)
        (folder / "baseline_before.json").write_bytes(before)
        return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "isolation": prefix}

    folder, record = once_per_run(tmp_path_factory, "demo-cold", run)
    log = folder / "network.log"
    return DemoRun(returncode=record["returncode"], stdout=record["stdout"], stderr=record["stderr"],
                   report=folder / "run.json", home=folder / "home",
                   network_log=log.read_text(encoding="utf-8") if log.exists() else "",
                   isolation=record["isolation"], baseline_before=(folder / "baseline_before.json").read_bytes())


def copy_home(run: DemoRun, to: Path) -> Path:
    """A copy of the home the cold session built (index, BM25 index, embedding cache): a warm start."""
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    shutil.copytree(run.home, to)
    return to
