"""Importing the package, the plugin and the CLI must not pull in the retrieval stack.

pytest loads the plugin through its entry point in every session of every project that has it
installed, with or without --rag-eval: the stack (torch, chromadb, sentence-transformers, BM25
libraries, jieba) may only be imported when a reference retriever is actually built.
Each check runs in a fresh interpreter so that this test session's own imports do not hide anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from plugins_off import IDLE_OFF  # tests/plugins_off.py

HEAVY = (
    "torch",
    "chromadb",
    "sentence_transformers",
    "transformers",
    "onnxruntime",
    "jieba",
    "bm25s",
    "rank_bm25",
    "scipy",
    "sklearn",
    "pandas",
)


def heavy_in(modules: list[str]) -> list[str]:
    return sorted(
        m for m in modules
        if m.split(".")[0] in HEAVY or m == "pytest_ragmetrics.stack" or m.startswith("pytest_ragmetrics.stack.")
    )


def test_import_package_plugin_and_cli_stays_light() -> None:
    code = "import json, sys\nimport pytest_ragmetrics, pytest_ragmetrics.plugin, pytest_ragmetrics.cli\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout)
    assert "pytest_ragmetrics.plugin" in modules and "pytest_ragmetrics.cli" in modules
    assert heavy_in(modules) == []


def test_the_check_itself_can_see_a_heavy_import() -> None:
    # guard against a vacuous check: an import of rank_bm25 (installed here) is reported
    code = "import json, sys\nimport rank_bm25\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "rank_bm25" in heavy_in(json.loads(proc.stdout))


def test_a_pytest_session_without_rag_eval_stays_light(tmp_path: Path) -> None:
    """The plugin, loaded by pytest through its entry point, imports nothing heavy in a session
    that does not ask for --rag-eval (configure, collection, run and teardown included)."""
    report = tmp_path / "modules.json"
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import json, sys

            def pytest_unconfigure(config):
                assert config.pluginmanager.has_plugin("ragmetrics"), "plugin not loaded via its entry point"
                with open({str(report)!r}, "w") as f:
                    json.dump(sorted(sys.modules), f)
            """
        ),
        encoding="utf-8",
    )
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert True\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *IDLE_OFF, str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    modules = json.loads(report.read_text(encoding="utf-8"))
    assert "pytest_ragmetrics.plugin" in modules
    assert heavy_in(modules) == []


def test_the_phone_number_library_loads_only_when_a_question_is_redacted() -> None:
    """phonenumbers (pure Python, 48 MB of numbering-plan data) is imported on the first redaction,
    not by the package, the plugin, the CLI or the sample verb's modules."""
    code = textwrap.dedent(
        """
        import json, sys
        import pytest_ragmetrics, pytest_ragmetrics.plugin, pytest_ragmetrics.cli
        import pytest_ragmetrics.cli.sample, pytest_ragmetrics.tools.sample
        before = "phonenumbers" in sys.modules
        from pytest_ragmetrics.tools.redact import redact
        print(json.dumps([before, redact("call +49 30 1234567"), "phonenumbers" in sys.modules]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [False, "call [phone]", True]
