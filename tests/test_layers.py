"""The package's layers, checked: imports point one way, so each layer can be read and tested alone.

core (flat at the root) <- gate/ <- report/ <- tools/ <- annotate/; _plugin/ (behind plugin.py)
and cli/ on top; stack/ sits on the core. Every import counts, also one inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_ragmetrics"
CORE = {"errors", "measures", "metrics", "evaluation", "golden", "trec", "results", "parents", "stats", "files",
        "output_paths", "formats",
        "corpus", "gold", "chunking", "protocol", "progress", "unjudged", "unanswerable", "scope", "__init__"}

#: layer -> the layers it may import from (its own included)
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "gate": {"core", "gate"},
    "report": {"core", "gate", "report"},
    "stack": {"core", "stack"},
    "adapters": {"core"},
    "tools": {"core", "gate", "report", "stack", "tools"},
    "annotate": {"core", "tools", "annotate"},
    "_plugin": {"core", "gate", "report", "tools", "_plugin"},
    "plugin": {"core", "_plugin"},
    "cli": {"core", "gate", "report", "tools", "stack", "annotate", "cli"},
    "__main__": {"cli"},
}
#: third-party or standard modules a layer must not touch
FORBIDDEN = {
    "core": {"pytest", "argparse", "_pytest"},
    "gate": {"pytest", "argparse", "_pytest"},
    "report": {"pytest", "argparse", "_pytest"},
    "tools": {"pytest", "argparse", "_pytest"},
    "annotate": {"pytest", "argparse", "_pytest"},
    "stack": {"pytest", "argparse", "_pytest"},
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "pytest_ragmetrics":
        raise ValueError(module)
    if len(parts) == 1:
        return "core"
    head = parts[1]
    if head in CORE:
        return "core"
    return head


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return found


def violations() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = layer_of(module_name(path))
        for line, target in imports_of(path):
            where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
            if target.split(".")[0] in FORBIDDEN.get(here, set()):
                problems.append(f"{where}: the {here} layer must not use {target.split('.')[0]}")
            if not target.startswith("pytest_ragmetrics"):
                continue
            there = layer_of(target)
            if there not in ALLOWED[here]:
                problems.append(f"{where}: the {here} layer may import only {sorted(ALLOWED[here])}")
    return problems


def test_imports_point_one_way() -> None:
    assert violations() == []


def test_the_check_sees_a_wrong_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard against a vacuous check: a core module importing the CLI is reported."""
    fake = tmp_path / "pytest_ragmetrics"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "metrics.py").write_text("from pytest_ragmetrics.cli import main\nimport pytest\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    found = violations()
    assert any("metrics.py:1 imports pytest_ragmetrics.cli" in p for p in found)
    assert any("must not use pytest" in p for p in found)
