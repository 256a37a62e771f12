"""The package's error types.

Every problem a user can cause (a bad golden set, a malformed run file, a baseline
measured under another configuration) raises a subclass of :class:`RagMetricsError`
whose message names the file, the record and what is wrong, so the pytest plugin
and the CLI can print it as a usage error instead of a traceback.
"""

from __future__ import annotations

__all__ = [
    "RagMetricsError",
    "InputError",
    "MeasureError",
    "BaselineError",
    "ThresholdsError",
    "RetrieverError",
    "RagMetricsWarning",
]


class RagMetricsError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(RagMetricsError, ValueError):
    """A data file (golden set, qrels, run) is malformed.

    ``path`` and ``where`` (line or record) are kept as attributes so callers
    can present them; the message already contains both.
    """

    def __init__(self, path: str | None, where: str | None, reason: str) -> None:
        self.path = path
        self.where = where
        self.reason = reason
        location = ", ".join(part for part in (path, where) if part)
        super().__init__(f"{location}: {reason}" if location else reason)


class MeasureError(RagMetricsError, ValueError):
    """An unknown metric name, a bad cutoff or a bad measurement option."""


class BaselineError(RagMetricsError):
    """The baseline file is missing, malformed or measured under another config."""


class ThresholdsError(RagMetricsError):
    """The thresholds file has an unknown key, a bad value or an unmeasured metric."""


class RetrieverError(RagMetricsError):
    """The retriever returned something that is not a ranking."""


class RagMetricsWarning(UserWarning):
    """Something worked, but not as the user meant it to (e.g. a broken search_batch was dropped)."""
