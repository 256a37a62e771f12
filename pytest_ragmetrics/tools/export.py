"""A run artifact as a TREC run, a golden set as TREC qrels.

So anyone can check the numbers with trec_eval, ranx or ir_measures: the run
keeps each query's ranking (documents after chunk mapping and dedup) in order,
written with descending scores so trec_eval's sort reproduces it exactly.
"""

from __future__ import annotations

from pathlib import Path

from pytest_ragmetrics.errors import InputError, brief_repr
from pytest_ragmetrics.files import loads_json, read_text

__all__ = ["artifact_rankings"]


def artifact_rankings(path: str | Path, text: str | None = None) -> dict[str, list[str]]:
    """Each query's ranked documents from a run artifact (``--rag-report``), in order.

    ``text`` is the file's content when the caller has read it already. A problem
    is an :class:`InputError` naming the file and the line or the query.
    """
    path = Path(path)
    name = str(path)
    if text is None:
        text = read_text(path)
    try:
        data = loads_json(text)
    except ValueError as exc:  # JSONDecodeError (a repeated key included), or a number too long
        line = getattr(exc, "lineno", None)
        raise InputError(name, f"line {line}" if line else None,
                         f"not a run artifact (written by --rag-report): invalid JSON: {getattr(exc, 'msg', exc)}") from None
    except RecursionError:
        raise InputError(name, None, "not a run artifact (written by --rag-report): JSON nested too deeply") from None
    per_query = data.get("per_query") if isinstance(data, dict) else None
    if not isinstance(per_query, dict):
        raise InputError(name, None, "not a run artifact (written by --rag-report): no per_query object")
    out: dict[str, list[str]] = {}
    for qid, entry in per_query.items():
        where = f"per_query[{brief_repr(qid)}]"
        if not isinstance(entry, dict):
            raise InputError(name, where, "expected an object with a ranking")
        ranking = entry.get("ranking") or []
        if not isinstance(ranking, list) or not all(isinstance(d, str) and d.strip() for d in ranking):
            raise InputError(name, where, f"ranking must be a list of document ids, got {brief_repr(ranking)}")
        out[qid] = list(ranking)
    return out
