"""One module a gate; importing this package registers them all, in the order runs report them.

See :mod:`pytest_ragmetrics.gate.registry` for what a gate declares and how a run is judged.
"""

from pytest_ragmetrics.gate.gates import (  # noqa: F401  (imported to register, in report order)
    baseline,
    coverage,
    leak,
    metric,
    no_answer,
    regressed,
    significant,
    stale,
    unjudged,
)
