"""Helpers for the plugin tests: a throwaway project driven by ``pytester``, and output parsers.

A :class:`RagProject` writes a small, real project into ``pytester.path``:

- ``golden.yaml``: a list of ``{id, question, gold_chunks, tags}`` records;
- ``rankings.json``: question -> what the retriever answers (a list of ids, or a
  dict asking it to raise, return something odd, or change between calls), so a
  test "degrades" chosen queries by rewriting this file between runs;
- ``conftest.py``: a session-scoped ``rag_retriever`` that reads ``rankings.json``
  on every call and logs each call to ``calls.log`` (one line per call, works
  across xdist workers), with ``search_batch`` when ``retriever.json`` says so;
- ``pytest.ini`` with the ``rag_*`` ini keys; ``baselines/thresholds.json`` on demand.

Runs go in-process (fast) unless xdist is involved.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from plugins_off import PLUGINS_OFF  # tests/plugins_off.py
from pytest_ragmetrics.files import dumps_stable
from pytest_ragmetrics.gate.artifact import seal_artifact

# --------------------------------------------------------------------------- data

#: Six queries, two strata (first tag), three of them tagged smoke.
GOLDEN: list[dict[str, Any]] = [
    {"id": "q-001", "question": "how do I fix a flat tire", "gold_chunks": ["tire-repair"],
     "tags": ["standard", "smoke"]},
    {"id": "q-002", "question": "how often should the chain be lubricated",
     "gold_chunks": ["chain-lube", "chain-clean"], "tags": ["standard"]},
    {"id": "q-003", "question": "why do my brakes squeal", "gold_chunks": {"brake-pads": 2, "brake-cable": 1},
     "tags": ["paraphrase", "smoke"]},
    {"id": "q-004", "question": "adjusting the rear derailleur", "gold_chunks": ["derailleur", "shifter-cable"],
     "tags": ["standard"]},
    {"id": "q-005", "question": "what tire pressure for gravel", "gold_chunks": ["tire-pressure"],
     "tags": ["paraphrase"]},
    {"id": "q-006", "question": "cleaning a dirty cassette", "gold_chunks": ["cassette", "chain-clean", "degreaser"],
     "tags": ["paraphrase", "smoke"]},
]

#: Every gold document comes back (some as chunks): recall, hit rate, MRR are 1 everywhere.
GOOD: dict[str, Any] = {
    "q-001": ["tire-repair#1-3", "tire-repair#2-3", "tube-patch#1-1"],
    "q-002": ["chain-lube#1-2", "noise-doc", "chain-clean#1-1"],
    "q-003": ["brake-pads#1-1", "rim-wear", "brake-cable"],
    "q-004": ["derailleur", "shifter-cable#2-2"],
    "q-005": ["tire-pressure"],
    "q-006": ["cassette", "chain-clean", "degreaser#1-4"],
}

QIDS = [g["id"] for g in GOLDEN]
GATES_DEFAULT = ["golden.yaml::gate::baseline", "golden.yaml::gate::coverage", "golden.yaml::gate::recall@10",
                 "golden.yaml::gate::significant-drops"]


def dcg(gains: list[float]) -> float:
    """DCG with exponential gain: sum (2^g - 1) / log2(rank + 1)."""
    return sum((2 ** g - 1) / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


# ------------------------------------------------------------------ the project's conftest

PROJECT_CONFTEST = r'''
import json
import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent
_seen = {}


def _log(line):
    with open(HERE / "calls.log", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def _settings():
    path = HERE / "retriever.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


class Hit:
    def __init__(self, id, score, explain):
        self.id, self.score, self.explain = id, score, explain


def _answer(query):
    value = json.loads((HERE / "rankings.json").read_text(encoding="utf-8"))[query]
    if isinstance(value, dict):
        if "raise" in value:
            raise RuntimeError(value["raise"])
        if "return" in value:  # as given, but [id, score] lists become pairs
            value = value["return"]
            return [tuple(x) if isinstance(x, list) else x for x in value] if isinstance(value, list) else value
        if "sequence" in value:  # a different answer on each call: not deterministic
            n = _seen[query] = _seen.get(query, -1) + 1
            value = value["sequence"][n % len(value["sequence"])]
        if "hits" in value:
            return [Hit(h["id"], h.get("score"), h.get("explain")) for h in value["hits"]]
    return [tuple(x) if isinstance(x, list) else x for x in value]


class Retriever:
    def search(self, query, k):
        _log("search\t" + query)
        return _answer(query)

    def describe(self):
        return _settings().get("describe", {"name": "json-retriever", "version": 1})


class BatchRetriever(Retriever):
    def search_batch(self, queries, k):
        _log("batch\t" + str(len(queries)))
        return [_answer(q) for q in queries]


@pytest.fixture(scope="session")
def rag_retriever():
    _log("fixture")
    return BatchRetriever() if _settings().get("batch") else Retriever()
'''

#: Appended for the xdist tests: records who writes the baseline and the artifact.
WRITE_SPY = r'''

def pytest_configure(config):
    if not config.getoption("rag_eval", False):
        return
    import pytest_ragmetrics._plugin.outputs as outputs_module
    import pytest_ragmetrics._plugin.judge as judge_module

    who = "worker" if hasattr(config, "workerinput") else "controller"
    real_write_baseline = judge_module.write_baseline
    real_write_artifact = outputs_module.write_artifact

    def write_baseline(path, baseline):
        _log("write-baseline\t" + who)
        return real_write_baseline(path, baseline)

    def write_artifact(rag, path):
        _log("write-artifact\t" + who)
        return real_write_artifact(rag, path)

    judge_module.write_baseline = write_baseline
    outputs_module.write_artifact = write_artifact
    config.add_cleanup(lambda: setattr(judge_module, "write_baseline", real_write_baseline))
    config.add_cleanup(lambda: setattr(outputs_module, "write_artifact", real_write_artifact))
'''

#: Plugins that play no part here and slow every run (tests/plugins_off.py): hypothesis' terminal
#: summary alone re-imports (and assertion-rewrites) hypothesis in every in-process run, ~1.5 s each.
QUIET = ("-p", "no:cacheprovider", *PLUGINS_OFF)


#: What ``--rag-update-baseline`` wrote, by the project files (and RAGMETRICS_* settings) it ran on.
_MEASURED: dict[str, dict[str, bytes]] = {}


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes; the call log and bytecode caches aside."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.name != "calls.log"}


class RagProject:
    """A small pytest project using the plugin, in ``pytester.path``."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path: Path = pytester.path
        self.records: list[dict[str, Any]] = [dict(r) for r in GOLDEN]
        self.answers: dict[str, Any] = dict(GOOD)
        self.ini_values: dict[str, str] = {"rag_golden": "golden.yaml"}
        self.conftest_text = PROJECT_CONFTEST
        self._write_golden()
        self._write_rankings()
        self._write_ini()
        (self.path / "conftest.py").write_text(self.conftest_text, encoding="utf-8")

    # ------------------------------------------------------------------ files
    def _write_golden(self) -> None:
        (self.path / "golden.yaml").write_text(
            yaml.safe_dump(self.records, sort_keys=False, allow_unicode=True), encoding="utf-8")

    def _write_rankings(self) -> None:
        by_question = {r["question"]: self.answers[r["id"]] for r in self.records if r["id"] in self.answers}
        (self.path / "rankings.json").write_text(json.dumps(by_question, indent=1), encoding="utf-8")

    def _write_ini(self) -> None:
        lines = ["[pytest]"] + [f"{k} = {v}" for k, v in self.ini_values.items()]
        (self.path / "pytest.ini").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def golden(self, records: list[dict[str, Any]]) -> None:
        """Replace the golden set (rankings follow the question texts)."""
        self.records = [dict(r) for r in records]
        self._write_golden()
        self._write_rankings()

    def edit_query(self, qid: str, **fields: Any) -> None:
        for r in self.records:
            if r["id"] == qid:
                r.update(fields)
        self._write_golden()
        self._write_rankings()

    def add_query(self, record: dict[str, Any], answer: Any) -> None:
        self.records.append(dict(record))
        self.answers[record["id"]] = answer
        self._write_golden()
        self._write_rankings()

    def remove_query(self, qid: str) -> None:
        self.records = [r for r in self.records if r["id"] != qid]
        self._write_golden()
        self._write_rankings()

    def answer(self, **by_qid: Any) -> None:
        """Change what the retriever returns for some queries (``q_002=[...]``)."""
        for key, value in by_qid.items():
            self.answers[key.replace("_", "-")] = value
        self._write_rankings()

    def restore(self) -> None:
        self.answers = dict(GOOD)
        self._write_rankings()

    def ini(self, **values: str) -> None:
        self.ini_values.update(values)
        self._write_ini()

    def retriever(self, **settings: Any) -> None:
        (self.path / "retriever.json").write_text(json.dumps(settings), encoding="utf-8")

    def thresholds(self, data: Any) -> Path:
        path = self.path / "baselines" / "thresholds.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(data if isinstance(data, str) else json.dumps(data, indent=1), encoding="utf-8")
        return path

    def spy_writes(self) -> None:
        self.conftest_text += WRITE_SPY
        (self.path / "conftest.py").write_text(self.conftest_text, encoding="utf-8")

    # ------------------------------------------------------------- baseline
    @property
    def baseline_path(self) -> Path:
        return self.path / "baselines" / "baseline.json"

    def baseline(self) -> dict[str, Any]:
        return json.loads(self.baseline_path.read_text(encoding="utf-8"))

    def make_baseline(self, *args: str) -> pytest.RunResult:
        result = self.run("--rag-update-baseline", *args)
        assert result.ret == 0, result.stdout.str()
        return result

    def baseline_once(self) -> None:
        """Give the project the baseline ``make_baseline()`` writes for it, measured once per session.

        A real ``--rag-update-baseline`` run measures it the first time these project
        files are seen; later projects with the same files get a copy of what that run
        wrote. Measuring is most of a plugin test's time, and ~200 tests start from it.
        """
        before = _files(self.path)
        settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("RAGMETRICS_"))
        key = hashlib.sha256(repr((sorted(before.items()), settings, type(self).__name__)).encode()).hexdigest()
        if key not in _MEASURED:
            self.make_baseline()
            _MEASURED[key] = {rel: data for rel, data in _files(self.path).items() if before.get(rel) != data}
            return
        for rel, data in _MEASURED[key].items():
            path = self.path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    # ------------------------------------------------------------------- calls
    def calls(self) -> list[str]:
        log = self.path / "calls.log"
        return log.read_text(encoding="utf-8").splitlines() if log.exists() else []

    def reset_calls(self) -> None:
        (self.path / "calls.log").unlink(missing_ok=True)

    # -------------------------------------------------------------------- runs
    def run(self, *args: str, rag: bool = True) -> pytest.RunResult:
        flags = ("--rag-eval",) if rag else ()
        return self.pytester.runpytest(*flags, "-rA", *QUIET, *args)

    def run_subprocess(self, *args: str, rag: bool = True) -> pytest.RunResult:
        flags = ("--rag-eval",) if rag else ()
        return self.pytester.runpytest_subprocess(*flags, "-rA", *QUIET, *args, timeout=120)


# ---------------------------------------------------------------------- parsing output

_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XPASS|XFAIL) (\S+)")


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """node id -> passed/failed/error, from the ``-rA`` short summary (serial or xdist)."""
    found: dict[str, str] = {}
    for line in result.outlines:
        m = _SUMMARY_LINE.match(line)
        if m:
            found[m.group(2)] = m.group(1).lower()
    return found


def ids_with(result: pytest.RunResult, outcome: str) -> list[str]:
    return sorted(n for n, o in outcomes(result).items() if o == outcome)


def rag_summary(result: pytest.RunResult) -> str:
    """The plugin's ``ragmetrics`` section of the terminal summary."""
    lines = result.outlines
    starts = [i for i, line in enumerate(lines) if re.match(r"^=+ ragmetrics =+$", line)]
    assert starts, "no ragmetrics section in:\n" + "\n".join(lines)
    out = []
    for line in lines[starts[-1] + 1:]:
        if re.match(r"^=+ .* =+$", line):
            break
        out.append(line)
    return "\n".join(out)


def worst_list(summary: str) -> list[str]:
    """Query ids of the worst-regressed list, in printed order."""
    _, _, tail = summary.partition("Worst regressed queries")
    return re.findall(r"^\s+\d+\. (\S+)  '", tail, flags=re.M)


def entry(summary: str, qid: str) -> str:
    """The lines of one worst-regressed entry."""
    _, _, tail = summary.partition("Worst regressed queries")
    m = re.search(rf"^\s+\d+\. {re.escape(qid)}  '.*?(?=^\s+\d+\. \S+  '|^\s+… and|\Z)", tail, flags=re.M | re.S)
    assert m, f"{qid} not listed in:\n{summary}"
    return m.group(0)


def drop_line(metric: str, before: float, after: float, note: str) -> str:
    """A regex for one 'metric  before -> after  (delta)  note' line."""
    return (rf"{re.escape(metric)}\s+{before:.4f} -> {after:.4f}\s+\({after - before:+.4f}\)\s+{re.escape(note)}")


def no_traceback(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text
    assert "INTERNALERROR" not in text


# ---------------------------------------------------------------------- artifacts of other nights

def set_created(path: Path, created: str, commit: str | None = None) -> None:
    """Rewrite an artifact's ``_meta.created`` (and ``git_commit`` if given) in the plugin's own format."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data["_meta"]["created"] = created
    if commit is not None:
        data["_meta"]["git_commit"] = commit
    path.write_text(dumps_stable(seal_artifact(data)), encoding="utf-8")  # as if the run had been on that day


def a_night_earlier(path: Path) -> None:
    """Date an artifact one day before it was made: the run of the night before, without waiting
    for the clock to give the next run another ``created`` time."""
    created = json.loads(path.read_text(encoding="utf-8"))["_meta"]["created"]
    set_created(path, (datetime.fromisoformat(created) - timedelta(days=1)).isoformat())
