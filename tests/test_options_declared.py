"""Options are declared once, in ``_plugin/options.py``'s ``OPTIONS``: pytest registers them from
there, ``build_options`` reads nothing else, and the options table in docs/configuration.md lists
exactly them, with the same ini names and defaults, in the same order."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics._plugin.options import OPTIONS, OptionSpec, build_options

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells; ``\\|`` inside a cell is not a column break."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _unquote(cell: str) -> str:
    return cell[1:-1] if cell.startswith("`") and cell.endswith("`") else cell


def documented_options(text: str) -> list[tuple[str, str, str]]:
    """(flag as written, ini key, default) for each row of the table under ``## Options``."""
    section = text.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert _cells(rows[0])[:3] == ["flag", "ini", "default"], rows[0]
    return [(_unquote(cells[0]), _unquote(cells[1]), cells[2]) for cells in map(_cells, rows[2:])]


def declared_options(options: tuple[OptionSpec, ...] = OPTIONS) -> list[tuple[str, str, str]]:
    return [(spec.usage(), spec.ini or "", spec.documented_default()) for spec in options]


def test_the_docs_table_lists_exactly_the_declared_options() -> None:
    documented = documented_options(DOC.read_text(encoding="utf-8"))
    declared = declared_options()
    missing = [row for row in declared if row not in documented]
    extra = [row for row in documented if row not in declared]
    assert missing == [] and extra == [], f"declared but not in the docs table as such: {missing}; " \
                                          f"in the docs table but not declared as such: {extra}"
    assert documented == declared  # and in the same order


def test_the_check_sees_a_row_that_differs() -> None:
    """Guard against a vacuous comparison: a changed default, a dropped row and a new option are each seen."""
    text = DOC.read_text(encoding="utf-8")
    declared = declared_options()
    changed = text.replace("| `rag_relevance_level` | `1` |", "| `rag_relevance_level` | `2` |")
    assert changed != text and documented_options(changed) != declared
    dropped = "\n".join(line for line in text.splitlines() if not line.startswith("| `--rag-repeat N`"))
    assert documented_options(dropped) != declared
    added = (*OPTIONS, OptionSpec("--rag-new", "rag_new", metavar="X", ini_default="y"))
    assert documented_options(text) != declared_options(added)


def test_pytest_registers_every_declared_option_with_its_default(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the plugin alone, however the outer run loads it
    config = pytester.parseconfig("-p", "pytest_ragmetrics.plugin")
    for spec in OPTIONS:
        if spec.flag:
            assert config.getoption(spec.dest) == (False if spec.switch else spec.flag_default), spec.flag
        if spec.ini:
            # default None: pytest 8 returns it; before 8, "" (plugin.py tells that from a value set empty)
            expected = (None, "") if spec.ini_default is None else (spec.ini_default,)
            assert config.getini(spec.ini) in expected, spec.ini
    help_text = pytester.runpytest("-p", "pytest_ragmetrics.plugin", "--help").stdout.str()
    for spec in OPTIONS:
        for name in (spec.flag, spec.ini):
            if name:
                assert re.search(rf"^\s+{re.escape(name)}\b", help_text, re.MULTILINE), name


def test_build_options_reads_only_declared_options(tmp_path: Path) -> None:
    """Every name ``build_options`` asks for is in the table, so nothing is declared a second time there."""
    flags = {spec.dest for spec in OPTIONS if spec.flag}
    inis = {spec.ini for spec in OPTIONS if spec.ini}
    asked: set[str] = set()

    def get(flag: str, ini: str) -> Any:
        if flag:
            assert flag in flags, f"build_options reads flag {flag!r}, which OPTIONS does not declare"
            asked.add(flag)
            spec = next(s for s in OPTIONS if s.flag and s.dest == flag)
            return False if spec.switch else spec.flag_default
        assert ini in inis, f"build_options reads ini {ini!r}, which OPTIONS does not declare"
        asked.add(ini)
        return next(s.ini_default for s in OPTIONS if s.ini == ini)

    options = build_options(get, lambda value, from_cli: tmp_path / value)
    assert options.k == 10 and options.batch_size == 32 and options.repeat == 1
    # every declared value is read, except --rag-eval (read by plugin.py to decide whether to run at all)
    assert (flags | inis) - asked == {"rag_eval"}
