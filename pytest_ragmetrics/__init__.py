"""pytest-ragmetrics: retrieval regression gating for RAG, as a pytest plugin.

The public API is what ``__all__`` lists; modules starting with ``_`` are private.
Importing the package is cheap: no retrieval stack, no torch, no chromadb.
"""

from __future__ import annotations

from ._errors import (
    BaselineError,
    InputError,
    MeasureError,
    RagMetricsError,
    RetrieverError,
    ThresholdsError,
)
from ._evaluate import Evaluation, evaluate, mean_metrics, score_query
from ._golden import GoldenSet, Query, load_golden, load_qrels
from ._measures import MEASURE_NAMES, Measure, MeasurementConfig, parse_measure, parse_measures
from ._metrics import document_ranking, judge, score
from ._trec import read_run, write_qrels, write_run

__version__ = "0.1.0"

__all__ = [
    "BaselineError",
    "Evaluation",
    "GoldenSet",
    "InputError",
    "MEASURE_NAMES",
    "Measure",
    "MeasureError",
    "MeasurementConfig",
    "Query",
    "RagMetricsError",
    "RetrieverError",
    "ThresholdsError",
    "__version__",
    "document_ranking",
    "evaluate",
    "judge",
    "load_golden",
    "load_qrels",
    "mean_metrics",
    "parse_measure",
    "parse_measures",
    "read_run",
    "score",
    "score_query",
    "write_qrels",
    "write_run",
]
