"""Where an output may go: the one rule for every output path, of the plugin and of every verb.

An output is never one of the run's inputs, never inside an input folder, never a project
configuration file or a file of this package, never another output, never inside ``.git`` or
``.pytest_cache``; and it replaces an existing file only when that file, told by its content
(:func:`kind_of`), is the kind the output writes. Checked before any work, so a refused output
costs nothing and loses nothing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.files import in_place

__all__ = ["check_output", "check_output_paths", "kind_of", "PROJECT_FILES", "ARTIFACT", "BASELINE", "THRESHOLDS",
           "GOLDEN", "HTML", "MARKDOWN", "JUNIT", "CANDIDATES", "JUDGMENTS", "DRAFT", "SHADOW", "TREC_RUN",
           "TREC_QRELS"]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet): the same path, links resolved, is still the same file
        return os.path.realpath(a) == os.path.realpath(b)


def check_output(path: str | Path, *, inputs: Sequence[str | Path] = (), force: bool = True,
                 example: str = "out.json") -> None:
    """Refuse, before any work is done, an output that could not be written or would destroy
    what it is made from: a folder, one of ``inputs`` (the same file, links followed; even with
    ``force``), an existing file unless ``force``, a path under a file or an unwritable folder.
    A device or FIFO (``/dev/stdout``) is written in place and passes."""
    out = Path(path)
    for source in inputs:
        if _same_file(out, Path(source)):
            raise RagMetricsError(f"{out} is the input {source}: writing it would replace what is read from it "
                                  "(--force does not allow that); give another path")
    if out.is_dir():
        raise RagMetricsError(f"{out} is a directory; give a file name such as {example}")
    if out.exists() and not force:
        raise RagMetricsError(f"{out} already exists; pass --force to overwrite it")
    if in_place(out):
        return
    folder = next((f for f in Path(os.path.abspath(out)).parents if f.exists() or f.is_symlink()), None)
    if folder is None or not folder.is_dir():
        raise RagMetricsError(f"cannot write {out}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RagMetricsError(f"cannot write {out}: {folder} is not a folder this user may write to")


#: Files that configure a project (pytest's ini files, conftest.py): never an output, wherever they are.
PROJECT_FILES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"})

_PACKAGE = Path(__file__).resolve().parent

#: Folders no output is ever written into: version control (whose HEAD the baseline's ratchet and
#: _meta.git_commit read) and pytest's cache (whose last-failed list --lf reads).
_KEPT_FOLDERS = frozenset({".git", ".hg", ".svn", ".pytest_cache"})
#: The kinds of file an output can be (what :func:`kind_of` tells an existing file to be).
ARTIFACT, BASELINE, THRESHOLDS, GOLDEN = "a run artifact", "a baseline", "a thresholds file", "a golden set"
HTML, MARKDOWN, JUNIT = "an HTML report", "a Markdown file", "a JUnit report"
CANDIDATES, JUDGMENTS, DRAFT, SHADOW = "a candidates file", "a judgments file", "a draft golden set", "a shadow report"
TREC_RUN, TREC_QRELS = "a TREC run", "TREC qrels"
#: Kinds no output replaces, --force or not, unless it writes that kind: the project's own files.
_KEPT_KINDS = frozenset({ARTIFACT, BASELINE, THRESHOLDS, GOLDEN, CANDIDATES, JUDGMENTS, DRAFT, "Python source"})
#: The largest file :func:`kind_of` reads to tell what it is.
_SNIFF_BYTES = 64 * 1024 * 1024


#: What each kind of file the tool writes is called, by the ``_meta.kind`` its JSON or JSONL carries.
_META_KINDS = {"ragmetrics-candidates": CANDIDATES, "ragmetrics-judgments": JUDGMENTS,
               "ragmetrics-draft": DRAFT, "ragmetrics-golden": GOLDEN, "ragmetrics-shadow": SHADOW}
_TREC_RUN = re.compile(r"^\S+\s+Q0\s+\S+\s+\d+\s+\S+\s+\S+\s*$")
_TREC_QRELS = re.compile(r"^\S+\s+\S+\s+\S+\s+-?\d+\s*$")


def _trivial(path: Path) -> bool:
    """An existing file that holds nothing to lose: empty, blank, or an empty JSON object or list."""
    try:
        if path.stat().st_size > 64:
            return False
        return path.read_text(encoding="utf-8-sig", errors="replace").strip() in ("", "{}", "[]")
    except OSError:
        return False


def kind_of(path: Path) -> str | None:
    """What an existing file is, told by its content (so a renamed or moved one is still known): one of
    the kinds the tool writes or reads (:data:`ARTIFACT`, :data:`BASELINE`, :data:`HTML` …), Python
    source, or None for a file it cannot tell. An output replaces an existing file only when this is the
    kind the output writes (:func:`check_output_paths`)."""
    if path.suffix == ".py":
        return "Python source"
    try:
        if path.stat().st_size > _SNIFF_BYTES:
            return None
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    head = text.lstrip()[:200].lower()
    if head.startswith(("<!doctype html", "<html")):
        return HTML
    if head.startswith("<?xml") and "<testsuite" in text[:4096]:
        return JUNIT
    data: Any = None
    try:
        data = json.loads(text)
    except ValueError:
        first = text.lstrip().split("\n", 1)[0]
        try:  # JSON lines: the first line says what the file is
            line = json.loads(first)
        except ValueError:
            line = None
        if isinstance(line, dict):
            meta = line.get("_meta")
            if isinstance(meta, dict) and meta.get("kind") in _META_KINDS:
                return _META_KINDS[str(meta["kind"])]
            if "qid" in line or "query" in line:
                return GOLDEN
    if data is None and path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml

            data = yaml.safe_load(text)
        except Exception:  # noqa: BLE001 - a file that does not parse is nothing this tool reads
            data = None
    if isinstance(data, dict):
        meta = data.get("_meta")
        if isinstance(meta, dict) and meta.get("kind") in _META_KINDS:
            return _META_KINDS[str(meta["kind"])]
        if isinstance(meta, dict) and "per_query" in data:
            if "comparison" in data or "shard" in data:
                return ARTIFACT
            if "aggregate" in data:
                return BASELINE
        if "_meta" not in data and any(isinstance(k, str) and (k.endswith(("_tolerance", "_min")) or k in (
                "max_regressed_queries", "fail_on_regression", "worst_n", "max_ungated_queries")) for k in data):
            return THRESHOLDS
    records = data.get("queries") if isinstance(data, dict) else data
    if isinstance(records, list) and records and all(isinstance(r, dict) for r in records) and any(
            "gold_chunks" in r or ("question" in r and "id" in r) for r in records):
        return GOLDEN
    lines = [line for line in text.splitlines()[:20] if line.strip()]
    if lines and all(_TREC_RUN.match(line) for line in lines):
        return TREC_RUN
    if lines and all(_TREC_QRELS.match(line) for line in lines):
        return TREC_QRELS
    if path.suffix.lower() in (".md", ".markdown"):
        return MARKDOWN
    return None


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def check_output_paths(outputs: Sequence[tuple[str, str | Path | None]],
                       inputs: Sequence[tuple[str, str | Path | None]], *,
                       may_replace: Mapping[str, str] | None = None, force: bool = False,
                       writes: Mapping[str, str] | None = None, forced: bool = False) -> None:
    """The one rule for every output path, in the plugin and in every verb, checked before any work.

    ``outputs`` are (option, path) pairs, ``inputs`` (what it is, path) pairs; a None path is
    not given. An output is refused when it is one of the inputs (the same file, links and ``..``
    resolved), lies inside an input folder (a folder golden set or corpus is read whole), is a
    project configuration file (:data:`PROJECT_FILES`) or one of this package's own files, or is
    the same file as another output. The message names the option, the path and which input it
    is; ``--force`` never overrides it (``force``: the verb has a --force, so say so).
    ``may_replace`` maps an option to the input (by what it is) that it rewrites on purpose
    (``export --golden-out`` over ``--golden``); any other input the same file is still refused.
    ``-`` and a device or FIFO (``/dev/stdout``) pass. ``writes`` says what kind of file each option
    writes (:data:`HTML`, :data:`ARTIFACT` …): an existing, non-empty file is replaced only when its content
    is that kind (:func:`kind_of`), whether or not the command was given it; one of the project's own kinds
    (a baseline, a golden set …) never, and any other only with ``--force`` (``forced``). No output goes
    inside ``.git`` or ``.pytest_cache``.
    """
    tail = " (--force does not change that)" if force else ""
    checked: list[tuple[str, Path, str]] = []
    for option, given in outputs:
        if given is None or str(given) == "-":
            continue
        out, shown = Path(given), str(given)  # named as the user spelled it
        if in_place(out):
            continue
        real = os.path.realpath(out)
        allowed = (may_replace or {}).get(option)
        for what, source in inputs:
            if source is None or str(source) == "-":
                continue
            src = Path(source)
            if what == allowed and _same_file(out, src):
                continue
            if _same_file(out, src):
                spelled = "" if shown == str(source) else f" ({source})"
                raise RagMetricsError(f"{option} {shown} is {what}{spelled}: an output is never written over an "
                                      f"input{tail}; give another path")
            if src.is_dir() and _inside(real, os.path.realpath(src)):
                raise RagMetricsError(f"{option} {shown} is inside {what} ({source}), a folder that is read whole: an "
                                      f"output is never written among the inputs{tail}; give a path outside it")
        for name in dict.fromkeys((out.name, Path(real).name)):
            if name in PROJECT_FILES:
                raise RagMetricsError(f"{option} {shown} is a project configuration file ({name}), which the run "
                                      f"reads: an output is never written over an input{tail}; give another path")
        kept = next((part for part in Path(real).parts if part in _KEPT_FOLDERS), None)
        if kept is not None:
            raise RagMetricsError(f"{option} {shown} is inside {kept}, which the tools that read the project keep: "
                                  f"an output is never written there{tail}; give another path")
        kind_wanted = (writes or {}).get(option)
        if allowed is None and kind_wanted is not None and Path(real).is_file() and not _trivial(Path(real)):
            kind = kind_of(Path(real))
            # Markdown is appended to: a text file nothing else claims is fine; a file of another kind is not
            if kind != kind_wanted and not (kind_wanted == MARKDOWN and kind is None):
                what = kind if kind is not None else "a file this tool did not write"
                if kind in _KEPT_KINDS:  # the project's own: never, --force or not
                    raise RagMetricsError(f"{option} {shown} exists and is {what}, not {kind_wanted}: an output "
                                          f"never replaces a file the project reads{tail}; give another path")
                if not forced:
                    raise RagMetricsError(
                        f"{option} {shown} already exists; pass --force to replace it ({what}, not {kind_wanted})"
                        if force else f"{option} {shown} exists and is {what}, not {kind_wanted}: an output replaces "
                                      "only a file of the kind it writes, so nothing is lost; remove the file first, "
                                      "or give another path")
        if _inside(real, str(_PACKAGE)):
            raise RagMetricsError(f"{option} {shown} is a file of pytest-ragmetrics itself ({_PACKAGE}): an output is "
                                  f"never written over the tool's own files{tail}; give another path")
        for other, path, spelled_first in checked:
            if _same_file(out, path):
                spelled = spelled_first if spelled_first == shown else f"{spelled_first}, {shown}"
                raise RagMetricsError(f"{other} and {option} are the same file ({spelled}): give each output its own "
                                      "path")
        checked.append((option, out, shown))
