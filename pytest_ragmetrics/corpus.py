"""Load a corpus: a folder of Markdown/text files or a ``corpus.jsonl``.

Documents are the unit the golden set judges, so every loader problem (a bad
JSON line, a missing field, two documents with one id) fails here, naming the
file and line, before anything is embedded. Plain Python (json, dataclasses), so the
leakage check reads a corpus without importing the reference stack that indexes it.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pytest_ragmetrics.errors import InputError, RagMetricsWarning, listed
from pytest_ragmetrics.files import check_unicode, loads_json, read_text, split_lines
from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR

__all__ = ["TEXT_SUFFIXES", "CorpusError", "Document", "load_corpus", "corpus_metadata"]

#: File suffixes read from a corpus folder.
TEXT_SUFFIXES = (".md", ".markdown", ".txt")


class CorpusError(InputError):
    """The corpus is malformed; the message names the file and the line."""


@dataclass(frozen=True)
class Document:
    """One retrievable unit as the golden set names it."""

    doc_id: str
    title: str
    text: str
    #: what a JSONL line holds besides ``doc_id``/``_id``, ``title`` and ``text`` (its own fields, and the
    #: keys of a BEIR-style ``metadata`` object): what a golden record's ``scope`` and ``filters`` match
    metadata: Mapping[str, Any] = field(default_factory=dict)


#: The fields of a corpus JSONL line that are the document itself, not its metadata.
_DOCUMENT_FIELDS = ("doc_id", "_id", "title", "text", "metadata")


def corpus_metadata(docs: list[Document]) -> dict[str, Mapping[str, Any]] | None:
    """Each document's metadata by id, or None when no document has any (a folder of text files)."""
    if not any(d.metadata for d in docs):
        return None
    return {d.doc_id: d.metadata for d in docs}


def load_corpus(path: str | Path) -> list[Document]:
    """Read documents from ``path``.

    ``path`` is a ``.jsonl`` file, a folder holding ``corpus.jsonl`` (the layout of
    the shared collections), or a folder of ``.md``/``.txt`` files (searched
    recursively; doc id = relative path without suffix, ``/``-separated).
    Documents come back in a stable order: file order for JSONL, sorted paths
    for folders.
    """
    p = Path(path)
    if p.is_file():
        docs = _load_jsonl(p)
    elif p.is_dir():
        jsonl = p / "corpus.jsonl"
        docs = _load_jsonl(jsonl) if jsonl.is_file() else _load_folder(p)
    else:
        where = ("" if p.is_absolute()
                 else f" (looked for {p.absolute()}: a relative path is read from the current directory)")
        raise CorpusError(str(p), None, f"no such corpus file or folder{where}")
    if not docs:
        raise CorpusError(str(p), None, "the corpus holds no documents")
    return docs


def _check_id(doc_id: Any, path: str, where: str | None) -> str:
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise CorpusError(path, where, f"doc_id must be a non-empty string, got {doc_id!r}")
    if DEFAULT_ID_SEPARATOR in doc_id:  # chunk ids are doc_id#i-n: this one could not be mapped back
        raise CorpusError(
            path, where, f"doc_id {doc_id!r} contains {DEFAULT_ID_SEPARATOR!r}, the chunk id separator"
        )
    return doc_id


def _load_jsonl(path: Path) -> list[Document]:
    """One JSON object a line: ``doc_id`` (or BEIR's ``_id``), ``text``, optional ``title``."""
    if path.suffix != ".jsonl":
        raise CorpusError(str(path), None, "a corpus file must be .jsonl (or pass a folder)")
    docs: list[Document] = []
    seen: dict[str, int] = {}
    name = str(path)
    for lineno, line in enumerate(split_lines(read_text(path)), start=1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            rec = loads_json(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(name, where, f"invalid JSON: {exc.msg}") from None
        check_unicode(rec, line, name, where)
        if not isinstance(rec, dict):
            raise CorpusError(name, where, "expected a JSON object")
        if "doc_id" not in rec and "_id" in rec:
            rec["doc_id"] = rec["_id"]
        missing = [f for f in ("doc_id", "text") if f not in rec]
        if missing:
            raise CorpusError(name, where, f"missing field(s): {', '.join(missing)}")
        doc_id = _check_id(rec["doc_id"], name, where)
        title, text = rec.get("title") or "", rec["text"]
        if not isinstance(text, str) or not isinstance(title, str):
            raise CorpusError(name, where, "title and text must be strings")
        if doc_id in seen:
            raise CorpusError(
                name, where, f"duplicate doc_id {doc_id!r} (first on line {seen[doc_id]})"
            )
        seen[doc_id] = lineno
        docs.append(Document(doc_id, title.strip(), text, _metadata(rec, name, where)))
    return docs


def _metadata(rec: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    """A JSONL line's metadata: its other fields, and the keys of its ``metadata`` object."""
    nested = rec.get("metadata")
    if nested is not None and not isinstance(nested, dict):
        raise CorpusError(name, where, f"metadata must be an object, got {type(nested).__name__}")
    found = {k: v for k, v in rec.items() if k not in _DOCUMENT_FIELDS}
    for key, value in (nested or {}).items():
        if key in found and found[key] != value:
            raise CorpusError(name, where, f"metadata key {key!r} is given twice with different values (a field "
                                           "of the line and a key of its metadata object)")
        found[key] = value
    odd = next((k for k in found if not k or k.startswith("$")), None)
    if odd is not None:  # "$or" would be read as an operator by a filter language (chromadb's among them)
        raise CorpusError(name, where, f"metadata key {odd!r}: a key must be non-empty and not start with '$'")
    return found


def _load_folder(root: Path) -> list[Document]:
    """Read every text file under ``root``; the first ``# `` heading becomes the title.

    A symlink whose target lies outside ``root`` is skipped with one warning naming
    it: the corpus is what the folder holds, and ``ragmetrics annotate`` serves its
    text (``notes.md -> ~/.ssh/config`` must not become a document). Folder symlinks
    are not followed; a file symlink to another file inside ``root`` is read.
    """
    files = sorted(f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
    real_root = root.resolve()
    docs: list[Document] = []
    seen: dict[str, Path] = {}
    outside: list[str] = []
    for f in files:
        rel = f.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue  # hidden folders (.git, .ragmetrics) are not corpus
        if f.is_symlink() and not f.resolve().is_relative_to(real_root):
            outside.append(f"{rel.as_posix()} -> {os.readlink(f)}")
            continue
        doc_id = _check_id(rel.with_suffix("").as_posix(), str(f), None)
        if doc_id in seen:
            raise CorpusError(str(f), None, f"duplicate doc_id {doc_id!r} (also {seen[doc_id]})")
        seen[doc_id] = f
        try:
            raw = f.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(str(f), None, f"not UTF-8 text: {exc.reason}") from None
        title, text = _split_title(raw)
        docs.append(Document(doc_id, title, text))
    if outside:
        warnings.warn(f"ragmetrics: {root}: skipped {len(outside)} symlink(s) to files outside the corpus folder: "
                      f"{listed(outside, 5)}", RagMetricsWarning, stacklevel=3)
    return docs


def _split_title(raw: str) -> tuple[str, str]:
    """Take the first ``# `` heading as title; drop it from the text when it opens the file.

    A heading that opens the file is removed so the title is not indexed twice
    (chunks are prefixed with the title); a later one stays in place.
    """
    lines = split_lines(raw)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    for i, line in enumerate(lines):
        if line.startswith("# "):
            title = line[2:].strip()
            if i == first:
                return title, "\n".join(lines[i + 1 :]).strip()
            return title, raw.strip()
    return "", raw.strip()
