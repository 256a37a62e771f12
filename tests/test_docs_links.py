"""Every relative link in the README, the top-level pages and docs/ leads somewhere.

The README is a front door whose reference lives in docs/: a moved section must not leave a link
(or a "#section" anchor) pointing at text that is no longer there. Anchors follow GitHub's rule:
the heading lower-cased, punctuation dropped, spaces turned into hyphens, repeats numbered.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / name for name in ("README.md", "BENCHMARKS.md", "CONTRIBUTING.md", "CHANGELOG.md")]
PAGES += sorted((REPO / "docs").rglob("*.md"))

#: ``[text](target)`` and ``![alt](target)``, one level of brackets inside the text allowed.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with inline code removed, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, only letters, digits, '-', '_'."""
    text = re.sub(r"`|\*+", "", heading).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_" or unicodedata.category(c).startswith("M"))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose(path):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        found.update(re.findall(r'<a\s+(?:id|name)="([^"]+)"', line))
    return found


def links(path: Path) -> list[tuple[int, str]]:
    return [(number, match.group(1)) for number, line in _prose(path)
            for match in LINK.finditer(re.sub(r"`[^`]*`", "", line))]


def broken(path: Path, root: Path = REPO) -> list[str]:
    """One line per link of ``path`` that leads to no file, or to no heading of the page it names."""
    problems = []
    for number, target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            problems.append(f"{where}: no heading with anchor #{fragment} in {dest.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken(page) == []


def test_the_checker_sees_the_links_and_the_moved_sections() -> None:
    """The check above cannot pass by finding nothing."""
    assert len(links(REPO / "README.md")) >= 10
    assert {"thresholdsjson", "what-happens-when", "7b-when-a-new-retriever-finds-documents-nobody-judged"} <= (
        anchors(REPO / "docs" / "configuration.md") | anchors(REPO / "docs" / "behaviour.md")
        | anchors(REPO / "docs" / "golden-set-life.md"))
    assert "## Options" in (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")


def test_a_moved_anchor_and_a_missing_page_are_reported(tmp_path: Path) -> None:
    """A link into the README for a section that now lives elsewhere is caught, with its line."""
    (tmp_path / "README.md").write_text("# Tool\n\n## Install\n\n```\n## Options\n```\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("Fine: [install](../README.md#install).\n"
                    "See [the options](../README.md#options), [gone](gone.md), `[code](nowhere.md)`.\n",
                    encoding="utf-8")
    assert broken(page, tmp_path) == [
        "docs/page.md:2: ../README.md#options: no heading with anchor #options in README.md",
        "docs/page.md:2: gone.md: no such file",
    ]
