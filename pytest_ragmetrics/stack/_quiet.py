"""Model loads without transformers' own progress bars.

transformers draws a "Loading weights" bar on stderr for every model it loads,
terminal or not; in a CI log that is three lines of carriage-return noise a run.
The stack reports its own progress (:mod:`pytest_ragmetrics.progress`), so the
bar is switched off for the load and the user's setting restored after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["quiet_model_load"]


@contextlib.contextmanager
def quiet_model_load() -> Iterator[None]:
    """Within the block, transformers draws no progress bars (import it first: it is heavy)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
