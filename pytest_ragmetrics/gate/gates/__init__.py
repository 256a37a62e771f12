"""One module a gate; importing this package registers them all.

:data:`ORDER` is the order runs collect and report the gates in (imports are sorted by name, so
the order is said here, once). See :mod:`pytest_ragmetrics.gate.registry` for what a gate declares.
"""

from pytest_ragmetrics.gate.gates import (  # noqa: F401  (imported to register)
    baseline,
    coverage,
    leak,
    lowered,
    metric,
    no_answer,
    regressed,
    significant,
    stale,
    unjudged,
)

ORDER = ("baseline", "coverage", "baseline-lowered", "metric", "regressed-queries", "significant-drops",
         "false_retrieval_rate", "stale-labels", "unjudged", "leak")
