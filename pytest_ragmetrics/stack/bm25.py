"""Lexical search: tokenisers (English, Chinese via jieba, both mixed) and BM25 behind one interface.

Three tokenisers, all NFKC-normalising and lowercasing first:

- ``en``: split on ``\\w+``, a short list of English function words dropped;
- ``zh``: jieba over the whole text, tokens without a word character dropped;
- ``mixed``: the text cut into runs of Han characters and the rest; jieba
  segments the Han runs, the English analyser the rest. A corpus holding
  Chinese and English documents needs it: jieba keeps "the" and "of" as terms,
  the English analyser makes a whole Chinese clause one token, so either alone
  ranks one of the two languages badly.

``language="auto"`` picks ``en`` for a corpus without a single Han character
(so an English corpus keeps its tokens, scores and stored index) and ``mixed``
otherwise, a wholly Chinese corpus included: on CMRC2018 it ranks as jieba does
(BM25 nDCG@10 0.9822 vs 0.9821 on whole documents). Queries go through the
index's tokenizer, so a question in either language meets the same analysis as
the documents in that language.

Two backends rank the same tokens: ``rank_bm25`` (``BM25Okapi``, the plain
reference implementation, pure Python) and ``bm25s`` (sparse matrices). They
differ in the IDF formula: rank_bm25 uses ``log((N-n+0.5)/(n+0.5))``, which is 0
for a term found in exactly half the documents and negative above that (floored
to ``0.25 x mean IDF``); bm25s's ``lucene`` variant uses ``log(1 + (N-n+0.5)/(n+0.5))``,
always positive. On a handful of documents common terms weigh very differently;
on real collections the rankings agree (``benchmarks/stack_bm25.py``, k1 1.5, b 0.75):

- scifact, whole documents: nDCG@10 0.672 (bm25s) vs 0.668 (rank_bm25), same
  top-1 for 97% of queries, 0.12 vs 11.4 ms a query;
- scifact, 31,592 chunks: 0.645 vs 0.643, 0.8 vs 89 ms a query;
- cmrc2018 (jieba), chunks: 0.995 vs 0.990, 0.6 vs 5.4 ms a query.

So bm25s is the default and rank_bm25 stays selectable as the reference.
Only documents with a positive score are returned: a document sharing no term
with the query was not found by this route, which matters for fusion.

A bm25s index can be kept on disk (:func:`stored_bm25`): tokenising SciFact's
31,592 chunks takes 2-3 s, and every process (each pytest-xdist worker too)
paid it again; a stored index is memory-mapped instead, once its files match
the manifest written with it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from pytest_ragmetrics.progress import SILENT

from .manifest import (
    ManifestError,
    describe_problems,
    file_lock,
    mismatches,
    read_manifest,
    record,
    report_repair,
    write_manifest,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "ENGLISH_STOPWORDS",
    "LANGUAGES",
    "BM25Index",
    "Tokenizer",
    "check_language",
    "chinese_tokenizer",
    "detect_language",
    "english_tokenizer",
    "make_tokenizer",
    "mixed_tokenizer",
    "stored_bm25",
]

Tokenizer = Callable[[str], list[str]]
Language = Literal["auto", "en", "zh", "mixed"]
#: The values ``language`` accepts, in the order error messages list them.
LANGUAGES: tuple[str, ...] = ("auto", "en", "zh", "mixed")

BACKENDS = ("bm25s", "rank_bm25")
#: bm25s ranks as well as rank_bm25 on the shared collections and is ~10-100x faster.
DEFAULT_BACKEND = "bm25s"

# A short, conservative list: function words only, so no content word is lost.
ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    his how i if in into is it its me my no nor not of on or our she should so than that the
    their them then there these they this those to too us was we were what when where which
    while who whom why will with would you your""".split()
)

_WORD = re.compile(r"\w+")
_HAS_WORD = re.compile(r"\w")
#: Han characters: CJK unified ideographs, extension A and the compatibility block.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{_HAN}]")
#: ``split`` with it alternates non-Han text (even positions) and Han runs (odd positions).
_HAN_RUN = re.compile(f"([{_HAN}]+)")


def english_tokenizer(stopwords: bool = True) -> Tokenizer:
    """Lowercase, NFKC-normalise, split on ``\\w+``; optionally drop :data:`ENGLISH_STOPWORDS`."""
    stop = ENGLISH_STOPWORDS if stopwords else frozenset()

    def tokenize(text: str) -> list[str]:
        norm = unicodedata.normalize("NFKC", text).lower()
        return [t for t in _WORD.findall(norm) if t not in stop]

    tokenize.language = "en"  # type: ignore[attr-defined]
    tokenize.signature = "en-stopwords" if stopwords else "en"  # type: ignore[attr-defined]
    return tokenize


def chinese_tokenizer() -> Tokenizer:
    """Segment with ``jieba.lcut``; keep tokens with a word character (no spaces or punctuation).

    jieba is imported on first use; its dictionary loads once per process (~1 s).
    """

    def tokenize(text: str) -> list[str]:
        import jieba

        jieba.setLogLevel(60)  # its "Building prefix dict" chatter goes to stderr
        norm = unicodedata.normalize("NFKC", text).lower()
        return [t for t in jieba.lcut(norm) if _HAS_WORD.search(t)]

    tokenize.language = "zh"  # type: ignore[attr-defined]
    tokenize.signature = "zh-jieba"  # type: ignore[attr-defined]
    return tokenize


def mixed_tokenizer() -> Tokenizer:
    """Chinese and English in one text: jieba for runs of Han characters, the English analyser elsewhere.

    The text is NFKC-normalised and lowercased, then cut into runs of Han
    characters and the rest. Han runs are segmented with jieba (tokens with a
    word character kept, as :func:`chinese_tokenizer` does); the rest is split
    on ``\\w+`` with :data:`ENGLISH_STOPWORDS` dropped, as :func:`english_tokenizer`
    does. A text without Han characters therefore gets exactly the English
    analyser's tokens, and jieba is imported only when a Han run is met.
    """

    def tokenize(text: str) -> list[str]:
        norm = unicodedata.normalize("NFKC", text).lower()
        parts = _HAN_RUN.split(norm)
        tokens = [t for t in _WORD.findall(parts[0]) if t not in ENGLISH_STOPWORDS]
        if len(parts) == 1:
            return tokens
        import jieba

        jieba.setLogLevel(60)  # its "Building prefix dict" chatter goes to stderr
        for han, rest in zip(parts[1::2], parts[2::2]):
            tokens.extend(t for t in jieba.lcut(han) if _HAS_WORD.search(t))
            tokens.extend(t for t in _WORD.findall(rest) if t not in ENGLISH_STOPWORDS)
        return tokens

    tokenize.language = "mixed"  # type: ignore[attr-defined]
    tokenize.signature = "mixed-zh-jieba+en-stopwords"  # type: ignore[attr-defined]
    return tokenize


def detect_language(texts: Sequence[str]) -> Literal["en", "mixed"]:
    """``"mixed"`` when any of ``texts`` holds a Han character, else ``"en"``.

    Every text is looked at, not a sample: one Chinese document among thousands
    of English ones still needs jieba to be found. A corpus without Han
    characters keeps the English analyser, so its tokens (and scores) do not
    change. A wholly Chinese corpus gets the mixed tokenizer too (one rule): on
    CMRC2018, BM25 nDCG@10 is 0.9822 with it against 0.9821 with jieba over
    whole texts (whole documents; 0.9823 vs 0.9824 in 300-character chunks),
    within one question of 4,219 either way, and English words in it get the
    English analysis (function words dropped) instead of being kept as terms.
    """
    return "mixed" if any(_CJK.search(text) for text in texts) else "en"


def make_tokenizer(language: Language = "auto", texts: Sequence[str] = ()) -> Tokenizer:
    """The tokenizer for ``language``; ``"auto"`` decides from ``texts`` (see :func:`detect_language`).

    ``"en"``: :func:`english_tokenizer`; ``"zh"``: :func:`chinese_tokenizer` (jieba
    over whole texts); ``"mixed"``: :func:`mixed_tokenizer`. The tokenizer's
    ``language`` attribute says which one was used.
    """
    check_language(language)
    if language == "auto":
        language = detect_language(texts)
    if language == "en":
        return english_tokenizer()
    if language == "zh":
        return chinese_tokenizer()
    return mixed_tokenizer()


def check_language(language: str) -> None:
    """Raise ValueError unless ``language`` is one of :data:`LANGUAGES`."""
    if language not in LANGUAGES:
        allowed = ", ".join(repr(v) for v in LANGUAGES[:-1]) + f" or {LANGUAGES[-1]!r}"
        raise ValueError(f"unknown language {language!r}: expected {allowed}")


#: Texts tokenised between two progress reports.
_TOKENISE_SLICE = 1000


def _tokenise(texts: Sequence[str], tokenizer: Tokenizer, progress: Any) -> list[list[str]]:
    """Every text's tokens, reported to ``progress`` as ``tokenising for BM25`` (jieba takes a while)."""
    progress = progress or SILENT
    progress.start("tokenising for BM25", len(texts), "chunks")
    tokens: list[list[str]] = []
    for start in range(0, len(texts), _TOKENISE_SLICE):
        part = texts[start:start + _TOKENISE_SLICE]
        tokens.extend(tokenizer(t) for t in part)
        progress.advance(len(part))
    progress.finish()
    return tokens


def _top_n(scores: np.ndarray, n: int) -> list[tuple[int, float]]:
    """Best ``n`` positive scores, ties broken by position so both backends order alike."""
    positive = np.flatnonzero(scores > 0)
    if n <= 0 or positive.size == 0:
        return []
    if positive.size > n:
        # keep everything tied with the n-th score, then order exactly
        kth = np.partition(scores[positive], positive.size - n)[positive.size - n]
        positive = positive[scores[positive] >= kth]
    order = sorted(positive.tolist(), key=lambda i: (-float(scores[i]), i))
    return [(i, float(scores[i])) for i in order[:n]]


class BM25Index:
    """BM25 over a list of texts; results are ``(position in texts, score)`` pairs, best first.

    Tokenising the texts is reported to ``progress`` (a :class:`pytest_ragmetrics.progress.Progress`).
    """

    def __init__(
        self,
        texts: Sequence[str],
        tokenizer: Tokenizer | None = None,
        *,
        backend: str = DEFAULT_BACKEND,
        k1: float = 1.5,
        b: float = 0.75,
        progress: Any = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown BM25 backend {backend!r}: expected one of {BACKENDS}")
        self.backend = backend
        self.k1, self.b = k1, b
        self.tokenizer = tokenizer or make_tokenizer("auto", texts)
        self.language: str = getattr(self.tokenizer, "language", "custom")
        #: What :func:`stored_bm25` repaired to give this index, one line each.
        self.repaired: list[str] = []
        #: Seconds :func:`stored_bm25` spent checking the stored copy against its manifest.
        self.manifest_seconds = 0.0
        self._size = len(texts)
        tokens = _tokenise(texts, self.tokenizer, progress)
        self._empty = not any(tokens)
        self._impl: Any = None
        if self._empty:
            return
        if backend == "rank_bm25":
            from rank_bm25 import BM25Okapi

            self._impl = BM25Okapi(tokens, k1=k1, b=b)
        else:
            import bm25s

            self._impl = bm25s.BM25(k1=k1, b=b, method="lucene")
            self._impl.index(tokens, show_progress=False)

    @classmethod
    def _from_bm25s(cls, impl: Any, size: int, tokenizer: Tokenizer, k1: float, b: float) -> BM25Index:
        """An index around an already built (e.g. loaded) bm25s model."""
        index = cls.__new__(cls)
        index.backend, index.k1, index.b = "bm25s", k1, b
        index.tokenizer = tokenizer
        index.language = getattr(tokenizer, "language", "custom")
        index.repaired, index.manifest_seconds = [], 0.0
        index._size, index._empty, index._impl = size, False, impl
        return index

    def __len__(self) -> int:
        return self._size

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every text for ``query`` (zeros where no term matches)."""
        if self._empty:
            return np.zeros(self._size, dtype=np.float64)
        tokens = self.tokenizer(query)
        if self.backend == "rank_bm25":
            return np.asarray(self._impl.get_scores(tokens), dtype=np.float64)
        vocab = self._impl.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids:
            return np.zeros(self._size, dtype=np.float64)
        return np.asarray(self._impl.get_scores(ids), dtype=np.float64)

    def search(self, query: str, n: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top ``n`` texts for ``query`` with a positive score; with ``allowed`` (a boolean mask over the
        texts) among those it keeps, filtered before ranking, so ``n`` still come back when they exist."""
        scores = self.scores(query)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        return _top_n(scores, n)

    def search_batch(self, queries: Sequence[str], n: int,
                     allowed: Sequence[np.ndarray | None] | None = None) -> list[list[tuple[int, float]]]:
        """:meth:`search` for each query (scoring is per query in both backends), each with its own mask."""
        masks = list(allowed) if allowed is not None else [None] * len(queries)
        return [self.search(q, n, mask) for q, mask in zip(queries, masks)]


#: Bumped when what :func:`stored_bm25` writes changes; part of the folder name.
STORE_FORMAT = 1
#: Written last into a stored index: its size and the manifest of its files (see :mod:`.manifest`).
META = "meta.json"


def stored_bm25(
    folder: Path,
    corpus_key: str,
    texts: Sequence[str],
    tokenizer: Tokenizer,
    *,
    k1: float = 1.5,
    b: float = 0.75,
    progress: Any = None,
) -> BM25Index:
    """A bm25s index of ``texts``, loaded from ``folder`` if stored there, else built and stored.

    The stored copy is named after ``corpus_key`` (which must change whenever
    the texts or their order do), the tokenizer's ``signature``, k1 and b. It is
    written to a temporary folder and renamed, so a concurrent reader sees all of
    it or none of it, and is memory-mapped when loaded. A tokenizer without a
    signature (a custom callable: what it does cannot be named) gets an index
    built in memory every time, as does a text list with no terms at all.

    ``meta.json``, written last, holds the manifest of the other files (size and
    SHA-256 each). They are checked before bm25s maps them; a stored index that
    differs, or has no manifest (an older version wrote it), is rebuilt and
    stored again, and the returned index's ``repaired`` says so in one line (also
    a :class:`~pytest_ragmetrics.errors.RagMetricsWarning`). Checking and
    repairing take the store's lock (``folder/.lock``), so one process repairs
    while the others wait and then load its copy.
    """
    signature = getattr(tokenizer, "signature", None)
    if not signature:
        return BM25Index(texts, tokenizer, backend="bm25s", k1=k1, b=b, progress=progress)
    name = f"bm25s-v{STORE_FORMAT}-{corpus_key[:32]}-{signature}-k1={k1:g}-b={b:g}"
    target = Path(folder) / name
    notes: list[str] = []
    checked = 0.0
    with file_lock(Path(folder) / ".lock"):
        if target.exists():
            t0 = time.perf_counter()
            problem = _check_bm25(target, len(texts))
            checked = time.perf_counter() - t0
            if problem is None:
                try:
                    index = _load_bm25(target, tokenizer, len(texts), k1, b)
                except (OSError, ValueError, KeyError) as exc:
                    problem = f"bm25s cannot load it ({exc})"
                else:
                    index.manifest_seconds = checked
                    return index
            notes.append(_replace_note(target, problem))
        index = BM25Index(texts, tokenizer, backend="bm25s", k1=k1, b=b, progress=progress)
        if not index._empty:
            try:
                _save_bm25(index, target)
            except OSError as exc:  # a full disk, a folder we cannot write: this run keeps it in memory
                notes.append(f"the BM25 index could not be stored as {target} ({exc.strerror or exc}); "
                             "this run built it in memory")
    index.manifest_seconds = checked
    for note in notes:
        index.repaired.append(note)
        report_repair(note, stacklevel=2)  # the caller of stored_bm25()
    return index


def _replace_note(target: Path, problem: str) -> str:
    """Delete a stored index that failed its check; say so, or why it could not be deleted."""
    try:
        shutil.rmtree(target)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return (f"the stored BM25 index {target} cannot be used ({problem}) and cannot be deleted "
                f"({exc.strerror or exc}); this run built it in memory: delete that folder")
    if problem == _UNVERIFIED:
        return f"the stored BM25 index {target} was rebuilt: {problem}; it is checked on every load from now on"
    return f"the stored BM25 index {target} was damaged and was rebuilt: {problem}"


_UNVERIFIED = "it had no manifest (an older version wrote it), so its files could not be checked"


def _check_bm25(target: Path, size: int) -> str | None:
    """What is wrong with a stored index before bm25s reads it, in one line; None when it checks out."""
    meta_path = target / META
    try:
        meta = read_manifest(meta_path)
    except FileNotFoundError:
        return f"{META} is missing"
    except ManifestError as exc:
        try:  # an older version's meta.json: {"size": n} alone
            old = json.loads(meta_path.read_bytes())
        except (OSError, ValueError):
            old = None
        if isinstance(old, dict) and set(old) == {"size"}:
            return _UNVERIFIED
        return str(exc)
    if meta.get("size") != size:
        return f"{META} says it holds {meta.get('size')!r} texts, expected {size}"
    bad = mismatches(target, meta["files"])
    return describe_problems(bad) if bad else None


def _save_bm25(index: BM25Index, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        index._impl.save(str(tmp), show_progress=False)
        files = record(tmp, [p.name for p in tmp.iterdir() if p.is_file()])
        # written last: its presence says the folder is complete, its manifest what it holds
        write_manifest(tmp / META, files, size=index._size)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the store is shared like the embedding cache
        try:
            os.replace(tmp, target)
        except OSError:  # another process stored it first: theirs is the same index
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_bm25(target: Path, tokenizer: Tokenizer, size: int, k1: float, b: float) -> BM25Index:
    import bm25s

    impl = bm25s.BM25.load(str(target), mmap=True, show_progress=False)
    if (impl.k1, impl.b) != (k1, b):
        raise ValueError(f"{target}: k1/b {impl.k1}/{impl.b}, expected {k1}/{b}")
    return BM25Index._from_bm25s(impl, size, tokenizer, k1, b)
