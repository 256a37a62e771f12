"""Shared helpers of the annotate tests: a small candidates file (imported by conftest and tests)."""

from __future__ import annotations

import json
import os
import re
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: three questions, two tags; display orders differ from the pooled orders on purpose
QUESTIONS: list[dict[str, Any]] = [
    {"qid": "q1", "query": "How do I bleed hydraulic disc brakes?", "tags": ["smoke", "standard"],
     "order": ["b", "a", "c"],
     "candidates": [
         {"doc_id": "a", "text": "Open the bleed nipple and push fluid through.", "rel": None,
          "found_by": ["bm25"], "ranks": {"bm25": 1}},
         {"doc_id": "b", "text": "Brake pads wear out; replace them in pairs.", "found_by": ["vector"],
          "ranks": {"vector": 1}},
         {"doc_id": "c", "text": "Tyre pressure for road bikes.", "found_by": ["bm25", "vector"],
          "ranks": {"bm25": 2, "vector": 3}}]},
    {"qid": "q2", "query": "What is reciprocal rank fusion?", "tags": ["smoke"], "order": ["e", "d"],
     "candidates": [{"doc_id": "d", "text": "RRF sums 1/(k + rank) over systems.", "found_by": ["hybrid"]},
                    {"doc_id": "e", "text": "BM25 is a bag-of-words ranking function.", "found_by": ["bm25"]}]},
    {"qid": "q3", "query": "Which chain lube for wet weather?", "tags": ["hard"], "order": ["f", "g"],
     "candidates": [{"doc_id": "f", "text": "Wet lube resists wash-off."},
                    {"doc_id": "g", "text": "Dry lube attracts less dirt."}]},
]
META = {"_meta": {"kind": "ragmetrics-candidates", "version": 1, "pool_id": "pool-1", "seed": 7, "depth": 3}}


def write_pool(path: Path, questions: list[dict[str, Any]] | None = None, meta: dict[str, Any] | None = META) -> Path:
    records = ([meta] if meta else []) + (QUESTIONS if questions is None else questions)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


REPO = Path(__file__).resolve().parents[2]


class Cli:
    """``ragmetrics annotate`` in a subprocess of this checkout, with the URL it printed."""

    def __init__(self, *args: str, cwd: Path | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest_ragmetrics", "annotate", *args], cwd=cwd,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     encoding="utf-8")
        self.lines: list[str] = []
        self._out: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.url = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                line = self._out.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if found:
                self.url = found.group(0)
                return
        self.proc.kill()
        err = self.proc.communicate()[1]
        raise AssertionError(f"no URL printed: {''.join(self.lines)}{err}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._out.put(line)
        self._out.put(None)

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str, str]:
        """Send ``sig`` and return the exit code, everything printed and stderr."""
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        while (line := self._out.get(timeout=10)) is not None:
            self.lines.append(line)
        return self.proc.returncode, "".join(self.lines), err

    def kill(self) -> None:
        """SIGKILL, as a crash or a closed terminal would."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
