"""A run artifact as a TREC run, a golden set as TREC qrels.

So anyone can check the numbers with trec_eval, ranx or ir_measures: the run
keeps each query's ranking (documents after chunk mapping and dedup) in order,
written with descending scores so trec_eval's sort reproduces it exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_ragmetrics.errors import InputError
from pytest_ragmetrics.files import loads_json

__all__ = ["artifact_rankings"]


def artifact_rankings(path: str | Path) -> dict[str, list[str]]:
    """Each query's ranked documents from a run artifact (``--rag-report``), in order."""
    path = Path(path)
    try:
        data = loads_json(path.read_text(encoding="utf-8"))
        per_query = data["per_query"]
        return {qid: list(entry.get("ranking") or []) for qid, entry in per_query.items()}
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(str(path), None, f"not a run artifact (written by --rag-report): {exc}") from None
