"""``ragmetrics annotate``: a local page for graded relevance judgments, and adjudication.

- :mod:`.judgments`: an annotator's judgments file (format, reading, atomic saving);
- :mod:`.adjudicate`: two annotators' files split into agreements and disagreements;
- :mod:`.task`: what the page shows and changes, as plain data;
- :mod:`.server`: the loopback HTTP server with its fixed routes; the page's HTML,
  script and style are package data in ``static/``.

Library code, no argument parsing: ``cli/annotate.py`` is the command.
"""

from __future__ import annotations

from pytest_ragmetrics.annotate.adjudicate import Comparison, Disagreement, compare_judgments, seed_adjudicated
from pytest_ragmetrics.annotate.judgments import (
    GRADES,
    KIND,
    Judgment,
    Judgments,
    JudgmentStore,
    default_out,
    read_judgments,
    render_judgments,
)
from pytest_ragmetrics.annotate.task import DEFAULT_GUIDELINES, Task, shown_questions

__all__ = [
    "DEFAULT_GUIDELINES",
    "GRADES",
    "KIND",
    "Comparison",
    "Disagreement",
    "Judgment",
    "JudgmentStore",
    "Judgments",
    "Task",
    "compare_judgments",
    "default_out",
    "read_judgments",
    "render_judgments",
    "seed_adjudicated",
    "shown_questions",
]
