"""The package's error types.

Every problem a user can cause (a bad golden set, a malformed run file, a baseline
measured under another configuration) raises a subclass of :class:`RagMetricsError`
whose message names the file, the record and what is wrong, so the pytest plugin
and the CLI can print it as a usage error instead of a traceback. :func:`brief_repr`
quotes the user's value in those messages without letting a hostile one swell them.
"""

from __future__ import annotations

import re
import reprlib
import unicodedata
from typing import Any, Sequence

__all__ = [
    "visible",
    "brief_repr",
    "listed",
    "shown",
    "shown_lines",
    "RagMetricsError",
    "InputError",
    "MeasureError",
    "BaselineError",
    "ThresholdsError",
    "RetrieverError",
    "RagMetricsWarning",
]

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def brief_repr(value: Any, limit: int = 80) -> str:
    """A bounded repr for error messages: a hostile value (a YAML alias bomb, a
    10 MB line, a 5,000-digit integer) must not make the message itself huge or slow."""
    if type(value) is str and len(value) <= _REPR.maxstring:  # the common case, as reprlib would give it
        text = repr(value)
        if len(text) <= _REPR.maxstring:
            return text if len(text) <= limit else text[: limit - 3] + "..."
    try:
        text = _REPR.repr(value)
    except Exception:  # e.g. int too large to convert to str
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Characters that move the cursor, end a line or reorder text on a terminal: C0 and C1 controls
#: (U+0085 included), the line and paragraph separators, and the bidi embeddings, overrides,
#: isolates and marks. A query id, question, document id or error message carrying one could
#: print a line of its own (a fake "All gates passed") or turn a FAILED line around. A lone
#: surrogate (from a ``\ud800`` escape in JSON) cannot be encoded at all: printing it would raise.
#: Zero-width characters (U+200B-U+200D, U+2060, U+FEFF) would make two different ids look alike.
_OTHER_UNSAFE = r"\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff\ud800-\udfff"
_UNSAFE_CHAR = re.compile(rf"[\x00-\x1f{_OTHER_UNSAFE}]")
_UNSAFE_BUT_NEWLINE = re.compile(rf"[\x00-\x09\x0b-\x1f{_OTHER_UNSAFE}]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def shown(text: str) -> str:
    """``text`` safe for one line of a terminal: every control and bidi character as its escape
    (``\\n``, ``\\x85``, ``\\u202e``); anything else, non-ASCII letters included, as it is."""
    return _UNSAFE_CHAR.sub(_escape, text)


def shown_lines(text: str) -> str:
    """Like :func:`shown`, but the line breaks of text this package composed stay line breaks."""
    return _UNSAFE_BUT_NEWLINE.sub(_escape, text)


def listed(items: Sequence[str], shown: int = 10) -> str:
    """The first ``shown`` items, comma-separated, then how many more: a list in a
    message is never cut without a word (each item on one line, as :func:`shown` prints it)."""
    more = f" … and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(_UNSAFE_CHAR.sub(_escape, str(item)) for item in items[:shown]) + more


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


def visible(text: str) -> str:
    """``text`` stripped, or "" when it holds no character a reader sees (spaces, zero-width and other
    format characters only): a reason kept for review must be readable in a diff."""
    text = text.strip()
    seen = any(not c.isspace() and unicodedata.category(c) not in ("Cf", "Cc", "Co", "Cn", "Zs", "Zl", "Zp")
               and c != "\u2800" for c in text)
    return text if seen else ""
