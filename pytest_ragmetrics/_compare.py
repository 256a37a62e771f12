"""``ragmetrics compare A B``: judge run B against reference A outside pytest.

A and B are run artifacts (``--rag-report``), a baseline.json, or TREC run files
(scored against ``--qrels``). The comparison is the plugin's: the same
:func:`~pytest_ragmetrics._gate.build_verdict`, thresholds and report text, plus
per-query wins, ties and losses, so a nightly job can gate without pytest.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ._baseline import Baseline, Thresholds, dumps_stable, load_baseline, load_thresholds
from ._errors import InputError, RagMetricsError
from ._evaluate import evaluate
from ._gate import EPS, QueryRecord, Verdict, build_verdict
from ._golden import GoldenSet, Query, load_golden, load_qrels, loads_json
from ._measures import MeasurementConfig
from ._report_text import verdict_text
from ._tables import markdown_table

__all__ = ["RunData", "load_run_data", "compare", "add_arguments", "run", "main"]


@dataclass
class RunData:
    """Per-query metrics of one side, with what is known of each query."""

    source: str
    metrics: dict[str, dict[str, float]]
    rankings: dict[str, list[str]] = field(default_factory=dict)
    tags: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    #: chunk- vs parent-level hit rates per query, when the run's results carried parent ids
    parent_levels: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def _metric_names(config: MeasurementConfig | None, side: RunData) -> list[str]:
    """The metrics to compare, in the order the run measured them."""
    if config is not None:
        return config.metric_names
    recorded = side.meta.get("measurement", {}).get("metrics") if isinstance(side.meta, dict) else None
    if recorded:
        return list(recorded)
    data = side.metrics
    names: dict[str, None] = {}
    for entry in data.values():
        for k in entry:
            if not k.startswith("_"):
                names.setdefault(k, None)
    return list(names)


def load_run_data(path: str | Path, qrels: str | Path | None = None,
                  config: MeasurementConfig | None = None) -> RunData:
    """Read an artifact, a baseline or (with qrels) a TREC run into :class:`RunData`."""
    path = Path(path)
    name = str(path)
    if not path.is_file():
        raise InputError(name, None, "file not found")
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if text.lstrip().startswith("{"):
        try:
            data = loads_json(text)
        except json.JSONDecodeError as exc:
            raise InputError(name, f"line {exc.lineno}", f"not valid JSON ({exc.msg})") from None
        if isinstance(data, dict) and "comparison" in data and isinstance(data.get("per_query"), dict):
            metrics, rankings, tags, errors, parents = {}, {}, {}, {}, {}
            for qid, entry in data["per_query"].items():
                if entry.get("status") == "scored" and entry.get("metrics"):
                    metrics[qid] = entry["metrics"]
                    if isinstance(entry.get("parent_level"), dict):
                        parents[qid] = entry["parent_level"]
                elif entry.get("status") == "error":
                    errors[qid] = entry.get("error") or "error"
                rankings[qid] = list(entry.get("ranking") or [])
                tags[qid] = list(entry.get("tags") or [])
            return RunData(name, metrics, rankings, tags, errors, data.get("_meta", {}), parents)
        baseline = load_baseline(path)
        return RunData(name, {q: baseline.metrics_of(q) for q in baseline.per_query}, meta=baseline.meta)
    if qrels is None:
        raise InputError(name, None, "a TREC run needs --qrels to be scored")
    from ._trec import read_run

    run = read_run(path)
    result = evaluate(run, load_qrels(qrels), config or MeasurementConfig())
    return RunData(name, result.per_query, {q: run.get(q, []) for q in result.per_query},
                   meta={"measurement": result.config.to_dict()})


def compare(a: RunData, b: RunData, thresholds: Thresholds, metrics: Sequence[str],
            golden: GoldenSet | None = None) -> tuple[Verdict, dict[str, tuple[int, int, int]]]:
    """Verdict of B against A, and per metric the (wins, ties, losses) of B."""
    qids = list(dict.fromkeys([*a.metrics, *b.metrics, *b.errors]))
    queries = []
    for qid in qids:
        if golden is not None and qid in golden:
            queries.append(golden[qid])
        else:
            queries.append(Query(qid, "", {}, tuple(b.tags.get(qid) or a.tags.get(qid) or ())))
    run_golden = GoldenSet(b.source, tuple(queries))
    records = {}
    for qid in qids:
        if qid in b.errors:
            records[qid] = QueryRecord(qid, "error", error=b.errors[qid])
        elif qid in b.metrics:
            m = {k: v for k, v in b.metrics[qid].items() if k in metrics}
            records[qid] = QueryRecord(qid, "scored", m, b.rankings.get(qid, []), [], len(b.rankings.get(qid, [])),
                                       parent_level=b.parent_levels.get(qid))
    baseline = Baseline(a.meta, {}, {q: {k: v for k, v in m.items() if k in metrics} for q, m in a.metrics.items()},
                        a.source)
    verdict = build_verdict(records, run_golden, baseline, thresholds, metrics)
    tally: dict[str, tuple[int, int, int]] = {}
    for metric in metrics:
        wins = ties = losses = 0
        for qid in a.metrics:
            if qid not in b.metrics and qid not in b.errors:
                continue
            before = a.metrics[qid].get(metric)
            after = 0.0 if qid in b.errors else b.metrics[qid].get(metric)
            if before is None or after is None:
                continue
            if after > before + EPS:
                wins += 1
            elif after < before - EPS:
                losses += 1
            else:
                ties += 1
        tally[metric] = (wins, ties, losses)
    return verdict, tally


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="reference: run artifact, baseline.json or TREC run")
    parser.add_argument("b", metavar="B", help="candidate: run artifact, baseline.json or TREC run")
    parser.add_argument("--qrels", help="judgments, needed when A or B is a TREC run")
    parser.add_argument("--golden", help="golden set, for question texts, tags and gold documents in the report")
    parser.add_argument("-m", "--metric", action="append", dest="metrics", metavar="NAME@K",
                        help="metrics to compare (default: those both sides have)")
    parser.add_argument("--thresholds", help="thresholds.json with the plugin's keys (default: no recall drop)")
    parser.add_argument("--worst", type=int, help="worst regressed queries to list (default: worst_n)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 1 when a gate fails, with the plugin's rules")
    parser.add_argument("--html", metavar="PATH", help="also write the self-contained HTML report")
    parser.add_argument("--format", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    config = MeasurementConfig(tuple(args.metrics)) if args.metrics else None
    a = load_run_data(args.a, args.qrels, config)
    b = load_run_data(args.b, args.qrels, config)
    names_a, names_b = _metric_names(config, a), _metric_names(config, b)
    metrics = [m for m in names_a if m in names_b]
    if not metrics:
        raise RagMetricsError(f"{args.a} and {args.b} share no metric (A: {names_a}, B: {names_b})")
    measurement = MeasurementConfig(tuple(metrics))
    thresholds = load_thresholds(args.thresholds, measurement) if args.thresholds else Thresholds.defaults(measurement)
    if args.thresholds and not Path(args.thresholds).exists():
        raise InputError(args.thresholds, None, "file not found")
    golden = load_golden(args.golden) if args.golden else None
    verdict, tally = compare(a, b, thresholds, metrics, golden)
    worst = args.worst if args.worst is not None else thresholds.worst_n
    if args.html:
        from ._report_html import render_html

        artifact = {"_meta": {**b.meta, "worst_n": worst, "measurement": {"metrics": metrics}},
                    "n": verdict.n, "comparison": verdict.to_dict(),
                    "per_query": {q: {"status": "error" if q in b.errors else "scored",
                                      "metrics": b.metrics.get(q), "baseline": a.metrics.get(q),
                                      "tags": b.tags.get(q, [])} for q in dict.fromkeys([*a.metrics, *b.metrics])}}
        Path(args.html).write_text(render_html(artifact, title=f"{Path(args.b).name} vs {Path(args.a).name}"),
                                   encoding="utf-8")
    if args.format == "json":
        payload = verdict.to_dict()
        payload["wins_ties_losses"] = {m: dict(zip(("wins", "ties", "losses"), t)) for m, t in tally.items()}
        sys.stdout.write(dumps_stable(payload))
    else:
        print(f"{args.b} against {args.a}\n")
        print(verdict_text(verdict, worst))
        print("\nPer query, B against A:")
        print(markdown_table(["metric", "wins", "ties", "losses"], [[m, *t] for m, t in tally.items()]))
    return 1 if args.fail_on_regression and not verdict.passed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``ragmetrics compare …`` from Python: the command's own parsing and exit codes."""
    from .cli import main as cli_main

    return cli_main(["compare", *(sys.argv[1:] if argv is None else argv)])