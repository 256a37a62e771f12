"""One cold ``pytest -n 2`` session of the reference stack, run once per test run and shared.

A cold ``-n 2`` session over the car corpus (tests/stack/data) starts two workers that each
import torch and load MiniLM, and one of them builds the index: about 20 s of CPU. Two tests
need exactly that session and check different things about it:
``test_xdist_index_once.py`` the build records each worker leaves (one built, the other
waited and reused) and the baseline it wrote, for its warm and damaged reruns on a copy;
``test_build_progress.py`` what the workers printed (the builder says so live on stderr).
So the session runs once, shared by the xdist workers (``tests/once.py``), and each test
asserts on its record. The session is the union of what each used to run: the documented
fixture's settings, progress shown for every step, ``--rag-update-baseline`` and a build record
per worker; neither test's evidence depends on the other's part (progress is told on stderr, the
records are files, the baseline is written at the end).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from once import once_per_run  # tests/once.py
from plugins_off import PLUGINS_OFF  # tests/plugins_off.py

CORPUS = Path(__file__).resolve().parents[1] / "stack" / "data" / "car_corpus.jsonl"

#: The documented fixture (the full build, vector index included), leaving a record of each build.
CONFTEST = r'''
import json, os, pathlib
import pytest

HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="session")
def rag_retriever(request):
    from pytest_ragmetrics.stack import Retriever

    retriever = Retriever(os.environ["COLD_XDIST_CORPUS"], chunk_size=120, overlap=20, mode="hybrid",
                          top_k=5, fetch_k=10, unique_docs=True)
    stats = retriever.build()
    who = getattr(request.config, "workerinput", {}).get("workerid", "serial")
    run = os.environ["COLD_XDIST_RUN"]
    (HERE / "builds").mkdir(exist_ok=True)
    (HERE / "builds" / f"{run}-{who}-{os.getpid()}.json").write_text(json.dumps(
        {"who": who, "encoded": stats["encoded"], "rebuilt": stats["vector_index_rebuilt"],
         "chunks": stats["chunks"], "data_dir": str(retriever.data_dir)}))
    return retriever
'''

#: Questions on the car corpus and the documents that answer them.
GOLDEN = [
    ("q1", "my car battery dies on cold mornings", ["battery-cold"]),
    ("q2", "squealing noise when braking", ["brake-pads"]),
    ("q3", "how often to change the engine oil", ["oil-change", "oil-level"]),
    ("q4", "correct tyre pressure", ["tyre-pressure"]),
    ("q5", "engine temperature gauge in the red", ["overheating", "coolant"]),
    ("q6", "start a car with a flat battery using cables", ["jump-start"]),
    ("q7", "wipers leave streaks on the windscreen", ["wipers"]),
    ("q8", "car pulls to one side", ["alignment"]),
]

#: What every run of this project needs in its environment (a test's own reruns set these too).
ENV = {"COLD_XDIST_CORPUS": str(CORPUS), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
#: The cold session shows every step of the build, however fast the machine is.
PROGRESS = {"RAGMETRICS_PROGRESS_INTERVAL": "0.001", "RAGMETRICS_PROGRESS_MIN_SECONDS": "0"}


@dataclass(frozen=True)
class ColdXdistRun:
    """What the shared cold session left: its exit code and output, its project folder
    (conftest, golden, ini, the baseline it wrote, ``builds/``) and its home. Copy, never change."""

    returncode: int
    stdout: str
    stderr: str
    project: Path
    home: Path


def write_project(path: Path) -> None:
    """The project: the conftest above, the golden set and an ini naming it."""
    (path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (path / "golden.jsonl").write_text("".join(
        json.dumps({"qid": qid, "query": text, "candidates": [{"doc_id": d, "rel": 1} for d in gold]}) + "\n"
        for qid, text, gold in GOLDEN), encoding="utf-8")
    (path / "pytest.ini").write_text("[pytest]\nrag_golden = golden.jsonl\n", encoding="utf-8")


def cold_xdist_run(tmp_path_factory: pytest.TempPathFactory) -> ColdXdistRun:
    """Run ``pytest --rag-eval -n 2 --rag-update-baseline`` cold, once per test run (the first
    worker to ask runs it, the other waits and reads its record)."""

    def run(folder: Path) -> dict[str, Any]:
        project, home = folder / "project", folder / "home"
        assert not home.exists(), f"{home} is left from an interrupted run: not a cold start"
        project.mkdir(exist_ok=True)
        write_project(project)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("RAGMETRICS_") and k not in ("PYTEST_ADDOPTS", "GITHUB_STEP_SUMMARY")}
        env.update(ENV, **PROGRESS, RAGMETRICS_HOME=str(home), COLD_XDIST_RUN="cold",
                   PYTEST_ADDOPTS=" ".join(PLUGINS_OFF),
                   HOME=str(project), USERPROFILE=str(project), PY_COLORS="0")  # as pytester's runs have
        proc = subprocess.run([sys.executable, "-m", "pytest", "--rag-eval", "-n", "2", "--rag-update-baseline",
                               "-p", "no:cacheprovider"], cwd=project, env=env, capture_output=True, text=True,
                              timeout=600)
        return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}

    folder, record = once_per_run(tmp_path_factory, "cold-xdist", run)
    return ColdXdistRun(returncode=record["returncode"], stdout=record["stdout"], stderr=record["stderr"],
                        project=folder / "project", home=folder / "home")
