"""pytest-ragmetrics: retrieval regression gating for RAG, as a pytest plugin.

The public API is what ``__all__`` lists; modules starting with ``_`` are private.
Names are imported on first use (PEP 562), so loading the pytest plugin, which
imports this package, costs next to nothing when ``--rag-eval`` is not given.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "BaselineError": "_errors",
    "InputError": "_errors",
    "MeasureError": "_errors",
    "RagMetricsError": "_errors",
    "RetrieverError": "_errors",
    "ThresholdsError": "_errors",
    "Evaluation": "_evaluate",
    "evaluate": "_evaluate",
    "mean_metrics": "_evaluate",
    "score_query": "_evaluate",
    "GoldenSet": "_golden",
    "Query": "_golden",
    "load_golden": "_golden",
    "load_qrels": "_golden",
    "MEASURE_NAMES": "_measures",
    "Measure": "_measures",
    "MeasurementConfig": "_measures",
    "parse_measure": "_measures",
    "parse_measures": "_measures",
    "document_ranking": "_metrics",
    "judge": "_metrics",
    "score": "_metrics",
    "read_run": "_trec",
    "write_qrels": "_trec",
    "write_run": "_trec",
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
    from ._errors import BaselineError, InputError, MeasureError, RagMetricsError, RetrieverError, ThresholdsError
    from ._evaluate import Evaluation, evaluate, mean_metrics, score_query
    from ._golden import GoldenSet, Query, load_golden, load_qrels
    from ._measures import MEASURE_NAMES, Measure, MeasurementConfig, parse_measure, parse_measures
    from ._metrics import document_ranking, judge, score
    from ._trec import read_run, write_qrels, write_run
