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
    time, read back from its record ``folder/done.json``.

    - ``make`` runs under an exclusive lock, once per run; the other workers wait, then read the record.
    - It writes whatever it makes inside ``folder`` and returns plain data (JSON gives it back: a tuple
      comes back a list); objects cannot be shared, so each worker reopens what ``make`` left there.
    - ``name`` is the folder's name: one per kind of shared work.
    - When ``make`` raises, the error is kept (``folder/failed.txt``) and every later caller fails with
      it, naming the worker that met it, instead of trying again on what the failed attempt left; when
      it skips (something this machine lacks), every later caller skips with the same reason.
    """
    folder = shared_folder(tmp_path_factory, name)
    done, failed, skipped = folder / "done.json", folder / "failed.txt", folder / "skipped.txt"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if skipped.exists():
            pytest.skip(skipped.read_text(encoding="utf-8"))
        if failed.exists():
            pytest.fail(f"the shared work {name!r} failed earlier in this run:\n{failed.read_text(encoding='utf-8')}",
                        pytrace=False)
        if not done.exists():
            try:
                made = make(folder)
            except pytest.skip.Exception as exc:
                skipped.write_text(str(exc.msg), encoding="utf-8")
                raise
            except BaseException as exc:
                worker = os.environ.get("PYTEST_XDIST_WORKER", "the test process")
                failed.write_text(f"in {worker}: {type(exc).__name__}: {exc}"[:5000], encoding="utf-8")
                raise
            record = folder / "done.json.tmp"  # whole or absent: a worker killed while writing leaves no record
            record.write_text(json.dumps(made), encoding="utf-8")
            os.replace(record, done)
    return folder, json.loads(done.read_text(encoding="utf-8"))
