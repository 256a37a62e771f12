"""Score many rankings at once: the library call behind the CLI and the plugin.

:func:`score_query` is the one place where a ranking becomes numbers (id mapping,
dedup, judging, every measure); :func:`evaluate` loops it over a run and
aggregates. Aggregates are plain means over the scored queries, summed with
``math.fsum`` so that they do not depend on query order (serial and xdist runs
agree to the last bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from pytest_ragmetrics.measures import MeasurementConfig
from pytest_ragmetrics.metrics import document_ranking, ideal_grades, judge, score

__all__ = ["Evaluation", "score_query", "evaluate", "mean_metrics", "id_rule", "below_one_query",
           "drop_beyond_one_query"]


def id_rule(separator: str | None) -> str:
    """The id rule in words, for every report header: the same run scores differently
    with and without mapping, so a number must say which rule produced it."""
    if not separator:
        return "ids: as given (no mapping)"
    return f"ids map to documents before {separator!r}, repeats dropped (first kept)"


def score_query(
    ranked_ids: Sequence[str],
    judgments: Mapping[str, int],
    config: MeasurementConfig,
    ideal: Sequence[int] | None = None,
    keep_graded: bool = False,
) -> tuple[list[str], dict[str, float] | None]:
    """Map, dedup and score one ranking.

    Returns the document ranking that was judged and the metrics, or ``None``
    for the metrics when the query has no relevant document at the configured level
    (with ``keep_graded``, only when it has no positive grade at all; see :func:`score`).
    """
    docs = document_ranking(ranked_ids, config.id_separator)
    judged = judge(docs, judgments, config.relevance_level, config.depth, ideal, config.condensed_depth)
    return docs, score(judged, config.measures, config.gain, keep_graded)


def mean_metrics(per_query: Iterable[Mapping[str, float]], metrics: Sequence[str]) -> dict[str, float]:
    """Mean of each metric over the given per-query results (empty input gives {})."""
    rows = list(per_query)
    if not rows:
        return {}
    return {m: math.fsum(r[m] for r in rows) / len(rows) for m in metrics}


#: baselines keep 10 decimals: a change of exactly one query's worth must read as neither less nor more
ONE_QUERY_EPS = 1e-9


def below_one_query(change: float, n: int) -> bool:
    """Whether a change of a mean over ``n`` queries is smaller than one query's worth.

    Each query's score lies in [0, 1], so one query moves the mean by up to 1/n: a
    nonzero change below that is a single question, not evidence of a better or worse system.
    """
    return n > 0 and 0 < abs(change) < 1 / n - ONE_QUERY_EPS


def drop_beyond_one_query(change: float, n: int) -> bool:
    """Whether a mean over ``n`` queries fell by more than one query's worth (1/n)."""
    return n > 0 and change < -(1 / n) - ONE_QUERY_EPS


@dataclass
class Evaluation:
    """Per-query metrics of a run, and what could not be scored.

    - ``per_query``: scored queries only, in qrels order.
    - ``unscorable``: judged queries with no positive grade (left out of means).
    - ``below_level``: scored queries whose positive grades all lie below the
      relevance level: nDCG from their grades, the level-based metrics 0 (trec_eval's
      numbers; they count in the means, as in trec_eval).
    - ``missing``: judged queries absent from the run; scored as empty rankings
      (all metrics 0) unless ``evaluate(..., missing="skip")`` left them out.
    - ``short``: queries whose ranking held fewer documents than the deepest
      cutoff, with how many it held (recall@k cannot reach its potential there).
    """

    config: MeasurementConfig
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    unscorable: list[str] = field(default_factory=list)
    below_level: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    short: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.per_query)

    @property
    def aggregate(self) -> dict[str, float]:
        return mean_metrics(self.per_query.values(), self.config.metric_names)

    def to_dict(self) -> dict[str, object]:
        return {"aggregate": self.aggregate, "per_query": self.per_query}


def evaluate(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    config: MeasurementConfig | None = None,
    missing: str = "zero",
) -> Evaluation:
    """Score every judged query of ``run`` (ranked ids per query id).

    Queries of the run that have no judgments are ignored, as trec_eval does.
    Relevance levels follow trec_eval: nDCG takes its gain from every positive
    grade whatever the level, so a query whose grades all lie below the level is
    still scored (nDCG as trec_eval computes it; recall, precision, hit rate, MRR
    and MAP 0, as trec_eval reports them with no relevant document) and listed in
    ``below_level``. A query with no positive grade at all is not scored and is
    listed in ``unscorable`` (trec_eval would report 0 for every measure).
    ``missing="zero"`` (default) scores judged queries absent from the run as
    empty rankings, so a query the system failed on counts against it;
    ``missing="skip"`` leaves them out, as trec_eval does without ``-c``.
    """
    if missing not in ("zero", "skip"):
        raise ValueError("missing must be 'zero' or 'skip'")
    config = config or MeasurementConfig()
    result = Evaluation(config)
    depth = config.depth
    empty: list[str] = []
    for qid, judgments in qrels.items():
        ranked = run.get(qid)
        if ranked is None:
            result.missing.append(qid)
            if missing == "skip":
                continue
            ranked = empty
        ideal = ideal_grades(judgments)
        docs, metrics = score_query(ranked, judgments, config, ideal, keep_graded=True)
        if metrics is None:
            result.unscorable.append(qid)
            continue
        result.per_query[qid] = metrics
        if not ideal or ideal[0] < config.relevance_level:
            result.below_level.append(qid)
        if depth is not None and len(docs) < depth:
            result.short[qid] = len(docs)
    return result
