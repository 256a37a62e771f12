"""Expensive work done once per test run and shared by its xdist workers (a cold build, an export).

The first worker to ask does the work, under a file lock; the others wait on the lock, then read the
record it left. The folder lives beside the workers' own temporary folders, so every worker sees it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def shared_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder of this test run that every xdist worker sees (beside their own temporary folders)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = tmp_path_factory.getbasetemp()
    folder = base.parent / f"{name}-{run}" if run else base / name
    folder.mkdir(exist_ok=True)
    return folder


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> tuple[Path, T]:
    """The folder ``name`` shared by this run's workers, and what ``make(folder)`` returned the first
    time, read back from its record ``folder/done.json`` (so as JSON gives it: a tuple comes back a
    list). ``make`` runs under an exclusive lock, once per run; when it fails it leaves no record, and
    the next worker to ask runs it again (and meets what the failed one left)."""
    folder = shared_folder(tmp_path_factory, name)
    done = folder / "done.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            record = folder / "done.json.tmp"  # whole or absent: a worker killed while writing leaves no record
            record.write_text(json.dumps(make(folder)), encoding="utf-8")
            os.replace(record, done)
    return folder, json.loads(done.read_text(encoding="utf-8"))
