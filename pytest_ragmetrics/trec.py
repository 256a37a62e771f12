"""TREC run files: read them in trec_eval's order, write them back.

A run line is ``qid Q0 doc rank score tag`` (separated by spaces or tabs; other
whitespace, such as NBSP, is refused). The rank must be ASCII digits but is otherwise
ignored, as trec_eval ignores it: documents are ordered by score
descending, then by document id descending (trec_eval's tie rule), so numbers
here match trec_eval's on the same file. A document repeated within a query is
an error, because it would be counted twice.
"""

from __future__ import annotations

import gc
import re
from itertools import islice
from math import isnan
from operator import gt
from pathlib import Path
from typing import Iterable, Mapping, Sequence, TextIO

from pytest_ragmetrics.errors import InputError, RagMetricsError, brief_repr
from pytest_ragmetrics.files import check_line_endings, check_no_bom, read_text, split_columns, split_lines

__all__ = ["read_run", "write_run", "write_qrels"]

#: A score as trec_eval's atof reads it: plain ASCII decimal or scientific notation
#: (inf and nan too, NaN then refused). Python's float() would also take "1_0" and
#: fullwidth or other scripts' digits, which no other tool reads as a number.
_SCORE = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE | re.ASCII)

#: A rank: ASCII digits. trec_eval ignores the column, but ``１`` (fullwidth) in it means
#: the file was not written by a tool that writes scores trec_eval can read either.
_RANK = re.compile(r"[0-9]+")

#: Whitespace a TREC file must not hold (see :func:`~pytest_ragmetrics.files.split_columns`).
_ODD_SPACE = re.compile(r"[^\S \t\n\r]")
_ASCII_ODD_SPACE = "\x0b\x0c\x1c\x1d\x1e\x1f"  # the same in ASCII text, searched for at C speed


def read_run(path: str | Path) -> dict[str, list[str]]:
    """Read a TREC run file into ``{qid: [doc, ...]}`` ranked as trec_eval ranks them."""
    path = Path(path)
    text = read_text(path)
    check_no_bom(text, str(path))
    check_line_endings(text, str(path))
    collecting = gc.isenabled()
    gc.disable()  # a million acyclic lists and floats would set off many useless collections
    try:
        run = _read_run_fast(text)
    finally:
        if collecting:
            gc.enable()
    if run is None:  # something is off: the checking reader names the line and the problem
        run = _read_run_checked(text, str(path))
    if not run:
        raise InputError(str(path), None, "the run file is empty")
    return run


def _read_run_fast(text: str) -> dict[str, list[str]] | None:
    """The common case at C speed where possible: every line has 6 columns, scores
    are numbers, no document repeats within a query. Returns ``None`` at the first
    doubt (a blank or malformed line, a bad score, NaN, a repeat) so that
    :func:`_read_run_checked` can report it exactly; the result is the same."""
    ascii_only = text.isascii()
    if any(char in text for char in _ASCII_ODD_SPACE) if ascii_only else _ODD_SPACE.search(text):
        return None
    grouped: dict[str, tuple[list[float], list[str]]] = {}
    current = None
    add_score = add_doc = None
    try:
        for qid, _, doc, rank, raw_score, _ in map(str.split, split_lines(text)):
            if qid != current:
                entry = grouped.get(qid)
                if entry is None:
                    entry = grouped[qid] = ([], [])
                add_score, add_doc = entry[0].append, entry[1].append
                current = qid
            if "_" in raw_score or not raw_score.isascii():  # float() reads them; _SCORE does not
                return None
            if not rank.isdigit() or not (ascii_only or rank.isascii()):  # isdigit takes "１" and "²"
                return None
            add_score(float(raw_score))  # type: ignore[misc]
            add_doc(doc)  # type: ignore[misc]
    except ValueError:  # wrong column count (unpacking) or a score that is not a number
        return None
    run: dict[str, list[str]] = {}
    for qid, (scores, docs) in grouped.items():
        if any(map(isnan, scores)) or len(set(docs)) != len(docs):
            return None
        if all(map(gt, scores, islice(scores, 1, None))):
            run[qid] = docs  # strictly decreasing scores: file order is trec_eval's order
        else:
            pairs = sorted(zip(scores, docs), reverse=True)  # score desc, then doc id desc
            run[qid] = [doc for _, doc in pairs]
    return run


def _read_run_checked(text: str, name: str) -> dict[str, list[str]]:
    """Line-by-line reader that validates everything and names the offending line."""
    scored: dict[str, list[tuple[float, str]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(split_lines(text), start=1):
        parts = split_columns(line, name, f"line {number}")
        if not parts:
            continue
        if len(parts) != 6:
            raise InputError(name, f"line {number}", "expected 6 columns (qid Q0 doc rank score tag), got "
                                                     f"{len(parts)}")
        qid, _, doc, rank, raw_score, _ = parts
        if not _RANK.fullmatch(rank):
            raise InputError(name, f"line {number}", f"rank {brief_repr(rank)} is not a whole number in ASCII "
                                                     "digits (0-9)")
        if not _SCORE.fullmatch(raw_score):
            raise InputError(name, f"line {number}", f"score {brief_repr(raw_score)} is not a number "
                                                     "(plain ASCII decimal or scientific notation)")
        value = float(raw_score)
        if value != value:  # NaN cannot be ordered
            raise InputError(name, f"line {number}", "score is NaN")
        key = (qid, doc)
        if key in seen:
            raise InputError(name, f"line {number}", f"document {brief_repr(doc)} appears twice for query "
                                                     f"{brief_repr(qid)} (first on line {seen[key]})")
        seen[key] = number
        scored.setdefault(qid, []).append((value, doc))
    run: dict[str, list[str]] = {}
    for qid, pairs in scored.items():
        pairs.sort(reverse=True)  # score desc, then doc id desc: trec_eval's order
        run[qid] = [doc for _, doc in pairs]
    return run


def _check_column(value: str, what: str, qid: str) -> str:
    """A TREC file separates its columns by whitespace: an id holding any (or empty) would
    shift the columns, and every reader, ``ragmetrics evaluate`` included, refuses the file."""
    if value.split() != [value]:
        where = "" if what == "query id" else f" of query {brief_repr(qid)}"
        raise RagMetricsError(f"{what} {brief_repr(value)}{where} is empty or holds whitespace, which separates "
                              "the columns of a TREC file; rename it before exporting (nothing was written)")
    return value


def write_run(
    out: TextIO,
    rankings: Mapping[str, Sequence[str]],
    scores: Mapping[str, Sequence[float]] | None = None,
    tag: str = "ragmetrics",
) -> None:
    """Write rankings as a TREC run. Without scores, ``-rank`` is written so that
    trec_eval's sort reproduces the given order exactly. An id holding whitespace is a
    :class:`RagMetricsError`: write to a buffer first to leave no partial file."""
    _check_column(tag, "run tag", "")
    for qid, docs in rankings.items():
        _check_column(qid, "query id", qid)
        qscores = scores.get(qid) if scores else None
        for rank, doc in enumerate(docs, start=1):
            value = float(-rank) if qscores is None else float(qscores[rank - 1])
            out.write(f"{qid} Q0 {_check_column(doc, 'document id', qid)} {rank} {value!r} {tag}\n")


def write_qrels(out: TextIO, qrels: Mapping[str, Mapping[str, int]] | Iterable[tuple[str, Mapping[str, int]]]) -> None:
    """Write judgments as TREC qrels (``qid 0 doc grade``)."""
    items = qrels.items() if isinstance(qrels, Mapping) else qrels
    for qid, judgments in items:
        _check_column(qid, "query id", qid)
        for doc, grade in judgments.items():
            out.write(f"{qid} 0 {_check_column(doc, 'document id', qid)} {grade}\n")
