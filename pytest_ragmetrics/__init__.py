"""pytest-ragmetrics: retrieval regression gating for RAG, as a pytest plugin.

The public API is what ``__all__`` lists; modules starting with ``_`` are private.
Names are imported on first use (PEP 562), so loading the pytest plugin, which
imports this package, costs next to nothing when ``--rag-eval`` is not given.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:  # written once, in pyproject.toml; an editable install reads it from its metadata too
    __version__ = version("pytest-ragmetrics")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

_EXPORTS = {
    "BaselineError": "errors",
    "InputError": "errors",
    "MeasureError": "errors",
    "RagMetricsError": "errors",
    "RetrieverError": "errors",
    "ThresholdsError": "errors",
    "Evaluation": "evaluation",
    "evaluate": "evaluation",
    "mean_metrics": "evaluation",
    "score_query": "evaluation",
    "GoldenSet": "golden",
    "Query": "golden",
    "load_golden": "golden",
    "load_qrels": "golden",
    "MEASURE_NAMES": "measures",
    "Measure": "measures",
    "MeasurementConfig": "measures",
    "parse_measure": "measures",
    "parse_measures": "measures",
    "BatchRetriever": "protocol",
    "CorpusRetriever": "protocol",
    "DescribedRetriever": "protocol",
    "FilteredRetriever": "protocol",
    "MetadataRetriever": "protocol",
    "Result": "protocol",
    "ResultWithId": "protocol",
    "Retriever": "protocol",
    "document_ranking": "metrics",
    "judge": "metrics",
    "score": "metrics",
    "read_run": "trec",
    "write_qrels": "trec",
    "write_run": "trec",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_ragmetrics' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from pytest_ragmetrics.errors import (
        BaselineError,
        InputError,
        MeasureError,
        RagMetricsError,
        RetrieverError,
        ThresholdsError,
    )
    from pytest_ragmetrics.evaluation import Evaluation, evaluate, mean_metrics, score_query
    from pytest_ragmetrics.golden import GoldenSet, Query, load_golden, load_qrels
    from pytest_ragmetrics.measures import MEASURE_NAMES, Measure, MeasurementConfig, parse_measure, parse_measures
    from pytest_ragmetrics.metrics import document_ranking, judge, score
    from pytest_ragmetrics.protocol import (
        BatchRetriever,
        CorpusRetriever,
        DescribedRetriever,
        FilteredRetriever,
        MetadataRetriever,
        Result,
        ResultWithId,
        Retriever,
    )
    from pytest_ragmetrics.trec import read_run, write_qrels, write_run
