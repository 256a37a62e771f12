"""Parent-chunk hit rate: is the context handed to the generator the one that answers?

Small-to-big retrieval searches small child chunks and hands each hit's larger
parent (a section, a page, the whole document) to the generator. A child can
match the question while its parent still misses the answer: the answer was cut
across two children and only one came back, or the parent lookup returned the
wrong parent. Child-level hit rate alone then overstates what the generator
gets, so when results carry a parent id the plugin reports both, side by side.

Definition. A query's *parent ranking* is the parent id of each returned result,
in the order the results came back (a result without a parent stands for
itself), mapped through the id separator and deduplicated like any ranking. It
is judged with the query's own judgments, and ``parent hit_rate@c`` is
``hit_rate@c`` over that ranking. Which unit the judgments name decides what the
comparison shows:

- documents (the usual golden set): the two agree unless a parent belongs to
  another document than its child, which is a broken parent lookup;
- passages, with ``rag_id_separator = none``: judge the children that hold part
  of an answer and the parents that hold all of it; the parent figure is then
  the share of questions whose generator context is complete.

The parent level is reported, not gated: the gate stays on the configured metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from pytest_ragmetrics.evaluation import mean_metrics, score_query
from pytest_ragmetrics.measures import Measure, MeasurementConfig

__all__ = ["ParentLevel", "parent_measures", "parent_ranking", "score_parents", "summarize_parents"]


def parent_ranking(ids: Sequence[str], parents: Sequence[str | None]) -> list[str]:
    """Each result's parent id in result order; a result without a parent stands for itself."""
    return [rid if parent is None else parent for rid, parent in zip(ids, parents)]


def parent_measures(config: MeasurementConfig, k: int) -> tuple[Measure, ...]:
    """The hit rates to compare: every configured ``hit_rate@c``, else ``hit_rate@k``."""
    hits = tuple(m for m in config.measures if m.name == "hit_rate")
    return hits or (Measure("hit_rate", k),)


def score_parents(
    ids: Sequence[str],
    parents: Sequence[str | None],
    judgments: Mapping[str, int],
    config: MeasurementConfig,
    k: int,
) -> dict[str, dict[str, float]] | None:
    """``{"chunk": {"hit_rate@c": v}, "parent": {...}}`` for one query's results.

    Both levels are scored with the same measures, so a hit rate the user did not
    configure is still compared. ``None`` when no judged document is relevant.
    """
    measures = parent_measures(config, k)
    hits_only = replace(config, measures=measures)
    _, chunk = score_query(ids, judgments, hits_only)
    _, parent = score_query(parent_ranking(ids, parents), judgments, hits_only)
    if chunk is None or parent is None:
        return None
    return {"chunk": chunk, "parent": parent}


@dataclass
class ParentLevel:
    """Chunk-level and parent-level hit rates over the queries whose results had parents.

    ``chunk``/``parent``: mean per metric over those ``n`` scored queries.
    ``chunk_only``: per metric, the queries whose child hit but whose parents all
    missed (the overstatement); ``parent_only``: the reverse.
    """

    n: int
    metrics: list[str]
    chunk: dict[str, float]
    parent: dict[str, float]
    chunk_only: dict[str, list[str]] = field(default_factory=dict)
    parent_only: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "metrics": {
                m: {"chunk": self.chunk[m], "parent": self.parent[m],
                    "chunk_hit_parent_missed": self.chunk_only.get(m, []),
                    "parent_hit_chunk_missed": self.parent_only.get(m, [])}
                for m in self.metrics
            },
        }


def summarize_parents(levels: Sequence[tuple[str, Mapping[str, Mapping[str, float]]]]) -> ParentLevel | None:
    """Means and disagreements from ``(qid, score_parents(...))`` per scored query.

    ``None`` when no query's results carried a parent id (nothing to report).
    Means are summed with ``math.fsum`` (:func:`mean_metrics`), so serial and
    xdist runs agree to the last bit.
    """
    if not levels:
        return None
    metrics = list(levels[0][1]["parent"])
    chunk = mean_metrics((lv["chunk"] for _, lv in levels), metrics)
    parent = mean_metrics((lv["parent"] for _, lv in levels), metrics)
    chunk_only = {m: [q for q, lv in levels if lv["chunk"][m] > lv["parent"][m]] for m in metrics}
    parent_only = {m: [q for q, lv in levels if lv["parent"][m] > lv["chunk"][m]] for m in metrics}
    return ParentLevel(len(levels), metrics, chunk, parent, chunk_only, parent_only)
