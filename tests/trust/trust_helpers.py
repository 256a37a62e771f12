"""Shared helpers of the trust tests (imported by their conftest and test modules)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ragproject import QUIET, RagProject

#: The plugin tests' quiet flags (the cache and the idle third-party plugins off).
FAST = QUIET


class TrustProject(RagProject):
    def run(self, *args: str, rag: bool = True, **kwargs: object) -> pytest.RunResult:
        flags = ("--rag-eval",) if rag else ()
        return self.pytester.runpytest(*flags, "-rA", *FAST, *args, **kwargs)

    def run_subprocess(self, *args: str, rag: bool = True) -> pytest.RunResult:
        flags = ("--rag-eval",) if rag else ()
        return self.pytester.runpytest_subprocess(*flags, "-rA", *FAST, *args, timeout=120)


#: Appended to the plugin tests' project conftest: answers that hang or interrupt.
#: ``{"hang": [...]}`` writes ``hanging`` and blocks until a ``release`` file exists,
#: then returns the list; ``{"slow": [seconds, [...]]}`` sleeps that long, then returns
#: the list; ``{"interrupt": true}`` raises KeyboardInterrupt (Ctrl-C
#: arriving inside the retriever).
HANGING_CONFTEST = r'''

import time as _time

_plain_answer = _answer


def _answer(query):
    value = json.loads((HERE / "rankings.json").read_text(encoding="utf-8"))[query]
    if isinstance(value, dict) and "hang" in value:
        (HERE / "hanging").write_text(query, encoding="utf-8")
        while not (HERE / "release").exists():
            _time.sleep(0.02)
        return value["hang"]
    if isinstance(value, dict) and "slow" in value:
        _time.sleep(value["slow"][0])
        return value["slow"][1]
    if isinstance(value, dict) and "interrupt" in value:
        (HERE / "interrupted").write_text(query, encoding="utf-8")
        raise KeyboardInterrupt
    return _plain_answer(query)
'''


def no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[-3000:]
    assert "INTERNALERROR" not in text, text[-3000:]


def usage_message(result: pytest.RunResult) -> str:
    """The usage error pytest printed (``ERROR: ragmetrics: ...``), checked to be one bounded paragraph."""
    err = result.stderr.str()
    match = re.search(r"^ERROR: (ragmetrics: .*?)(?:\n\s*\n|\Z)", err, flags=re.S | re.M)
    assert match, f"no ragmetrics usage error in stderr:\n{err[-3000:]}"
    message = match.group(1).strip()
    assert "\n\n" not in message
    assert len(message) < 1500, f"message of {len(message)} characters"
    return message


def assert_usage_error(result: pytest.RunResult, *needles: str) -> str:
    out = result.stdout.str() + result.stderr.str()
    no_traceback(out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    message = usage_message(result)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every file under ``root`` (bytecode caches aside) with its bytes and mtime; folders as None."""
    files: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        files[rel] = (path.read_bytes(), path.stat().st_mtime_ns) if path.is_file() else None
    return files


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess: offline model hub, no stray RAGMETRICS_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_") and k != "PYTEST_ADDOPTS"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env
