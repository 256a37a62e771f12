"""The package's size figures, the ones CONTRIBUTING holds it to ("Layout", "Sizes").

Run ``python tests/house.py`` from the checkout: it prints the modules over 600 lines, the functions
of 80 lines or more, the untyped-dict annotations per 1,000 lines, and each ``cli/`` ``run()``
over 40 lines. ``tests/test_house.py`` holds the ceilings.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_ragmetrics"

#: A mapping from str to Any (or object) says nothing of its keys: what travels as one is untyped.
UNTYPED_DICT = re.compile(r"\b(?:dict|Mapping|MutableMapping)\[str,\s*(?:Any|object)\]")

MODULE_LINES = 600
FUNCTION_LINES = 80
COMMAND_LINES = 40


@dataclass
class Figures:
    lines: int = 0
    big_modules: list[tuple[int, str]] = field(default_factory=list)
    long_functions: list[tuple[int, str]] = field(default_factory=list)
    long_commands: list[tuple[int, str]] = field(default_factory=list)
    untyped_dicts: list[str] = field(default_factory=list)

    @property
    def untyped_per_1000(self) -> float:
        return 1000 * len(self.untyped_dicts) / max(self.lines, 1)


def measure(package: Path = PACKAGE) -> Figures:
    figures = Figures()
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        name = str(path.relative_to(package))
        lines = source.splitlines()
        figures.lines += len(lines)
        if len(lines) > MODULE_LINES:
            figures.big_modules.append((len(lines), name))
        for number, line in enumerate(lines, 1):
            figures.untyped_dicts += [f"{name}:{number}"] * len(UNTYPED_DICT.findall(line))
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            where = f"{name}:{node.lineno} {node.name}"
            if length >= FUNCTION_LINES:
                figures.long_functions.append((length, where))
            if path.parent.name == "cli" and node.name == "run" and length > COMMAND_LINES:
                figures.long_commands.append((length, where))
    return figures


def main() -> int:
    figures = measure()
    print(f"{figures.lines} lines in {PACKAGE.name}/")
    print(f"modules over {MODULE_LINES} lines: {len(figures.big_modules)}")
    for length, name in sorted(figures.big_modules, reverse=True):
        print(f"  {length:5}  {name}")
    print(f"functions of {FUNCTION_LINES} lines or more: {len(figures.long_functions)}")
    for length, where in sorted(figures.long_functions, reverse=True):
        print(f"  {length:5}  {where}")
    print(f"cli run() over {COMMAND_LINES} lines: {len(figures.long_commands)}")
    for length, where in sorted(figures.long_commands, reverse=True):
        print(f"  {length:5}  {where}")
    print(f"untyped-dict annotations: {len(figures.untyped_dicts)}, {figures.untyped_per_1000:.1f} per 1,000 lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
