"""The demo's ablation table: one loop over modes, through the library.

    python eval/eval_retrieval.py                      # bm25 / vector / hybrid (+ rerank with a model)
    python eval/eval_retrieval.py --sweeps             # plus top_k, fetch_k and chunk_size sweeps
    python eval/eval_retrieval.py --rerank-model PATH  # a local CrossEncoder folder

Measured as the demo gate measures (``conftest.py``): chunks of 300/60, documents
filled to k (``unique_docs``), fetch_k 30, the gate's four metrics at 10. The same
thing, for any corpus and golden set, is ``ragmetrics ablate``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("bm25", "vector", "hybrid", "hybrid+rerank")
METRICS = ("recall@10", "hit_rate@10", "mrr@10", "ndcg@10")
SWEEPS = {"top_k": [5, 10, 20], "fetch_k": [10, 30, 60], "chunk_size": [200, 300, 500]}
#: The notes name the option of this script that adds the rerank row.
SPELLING = {"rerank_model": "--rerank-model PATH"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerank-model", default=None, help="CrossEncoder folder for the hybrid+rerank row")
    parser.add_argument("--sweeps", action="store_true", help="add the top_k, fetch_k and chunk_size sweeps (hybrid)")
    parser.add_argument("--by", default="mrr@10", help="metric of the per-query breakdown (default mrr@10)")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models come from local folders only
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from pytest_ragmetrics import MeasurementConfig, load_golden
    from pytest_ragmetrics.stack.factory import stack_factory
    from pytest_ragmetrics.tools.ablate import Setting, ablate, sweep_settings
    from pytest_ragmetrics.report.ablation import render_markdown

    golden = load_golden(ROOT / "eval" / "golden.yaml")
    retrievers = stack_factory(ROOT / "eval" / "corpus", rerank_model=args.rerank_model, unique_docs=True)
    config = MeasurementConfig(measures=METRICS)

    # The whole ablation: one setting per mode, one search_batch each.
    settings = [Setting(mode=mode, top_k=10, fetch_k=30, unique_docs=True) for mode in MODES]
    tables = [ablate(golden, retrievers, settings, config, title="Demo: modes (top_k 10, fetch_k 30, chunks 300/60)",
                     spelling=SPELLING)]

    if args.sweeps:
        base = Setting(mode="hybrid", top_k=10, fetch_k=30, unique_docs=True)
        for param, values in SWEEPS.items():
            # top_k moves the cutoff with it (recall@k ...): each row at the depth the application reads
            metrics = [m.replace("@10", "@k") for m in METRICS] if param == "top_k" else None
            tables.append(ablate(golden, retrievers, sweep_settings(base, param, values), config,
                                 metrics=metrics, parameter=param, title=f"Demo: hybrid, sweep {param}",
                                 spelling=SPELLING))

    no_answer = len(golden.unanswerable())  # no recall or MRR to compare: the gate scores them by false retrieval
    print(f"{len(golden) - no_answer} questions, corpus {len(retrievers(None).documents)} documents (eval/corpus)"
          + (f"; {no_answer} more marked answerable: false are left out" if no_answer else "") + "\n")
    print(render_markdown(tables, column=args.by), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
