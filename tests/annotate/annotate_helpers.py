"""Shared helpers of the annotate tests: a small candidates file (imported by conftest and tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: three questions, two tags; display orders differ from the pooled orders on purpose
QUESTIONS: list[dict[str, Any]] = [
    {"qid": "q1", "query": "How do I bleed hydraulic disc brakes?", "tags": ["smoke", "standard"],
     "order": ["b", "a", "c"],
     "candidates": [
         {"doc_id": "a", "text": "Open the bleed nipple and push fluid through.", "rel": None,
          "found_by": ["bm25"], "ranks": {"bm25": 1}},
         {"doc_id": "b", "text": "Brake pads wear out; replace them in pairs.", "found_by": ["vector"],
          "ranks": {"vector": 1}},
         {"doc_id": "c", "text": "Tyre pressure for road bikes.", "found_by": ["bm25", "vector"],
          "ranks": {"bm25": 2, "vector": 3}}]},
    {"qid": "q2", "query": "What is reciprocal rank fusion?", "tags": ["smoke"], "order": ["e", "d"],
     "candidates": [{"doc_id": "d", "text": "RRF sums 1/(k + rank) over systems.", "found_by": ["hybrid"]},
                    {"doc_id": "e", "text": "BM25 is a bag-of-words ranking function.", "found_by": ["bm25"]}]},
    {"qid": "q3", "query": "Which chain lube for wet weather?", "tags": ["hard"], "order": ["f", "g"],
     "candidates": [{"doc_id": "f", "text": "Wet lube resists wash-off."},
                    {"doc_id": "g", "text": "Dry lube attracts less dirt."}]},
]
META = {"_meta": {"kind": "ragmetrics-candidates", "version": 1, "pool_id": "pool-1", "seed": 7, "depth": 3}}


def write_pool(path: Path, questions: list[dict[str, Any]] | None = None, meta: dict[str, Any] | None = META) -> Path:
    records = ([meta] if meta else []) + (QUESTIONS if questions is None else questions)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path
