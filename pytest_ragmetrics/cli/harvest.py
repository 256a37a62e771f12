"""``ragmetrics harvest``: the questions nightly runs failed, as candidates for ``ragmetrics annotate``."""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli.argtypes import check_outputs, output_argument, path_arg, seed_arg
from pytest_ragmetrics.errors import RagMetricsError, listed, shown
from pytest_ragmetrics.output_paths import CANDIDATES, check_output
from pytest_ragmetrics.report.tables import counted

HELP = "gather the questions run artifacts regressed, errored or left inconclusive into candidates for annotate"


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "harvest", help=HELP,
        description="Read run artifacts (pytest --rag-eval --rag-report=FILE, e.g. a week of nightly runs of one "
                    "golden set) and gather every question one of them regressed, errored or left inconclusive, "
                    "once, with the documents each failing run returned in its top k, into a candidates file "
                    "for `ragmetrics annotate`. Each question is marked source: harvested, which the judgments "
                    "and the golden records exported from them keep. Harvested questions over-fit known "
                    "failures: the report warns when they exceed max_harvested_share of a golden set.")
    parser.set_defaults(command=run)
    parser.add_argument("artifacts", nargs="+", metavar="ARTIFACT", type=path_arg,
                        help="run artifacts of one golden set")
    output_argument(parser, "-o", "--out", writes=CANDIDATES, required=True,
                    help="output candidates JSONL (refused if it exists, unless --force; never one of the inputs)")
    parser.add_argument("--golden", default=None, type=path_arg,
                        help="the golden set the runs were judged with, for texts, tags and every known judgment "
                             "(default: the one the artifacts name in _meta.golden.source, when found; else "
                             "the artifacts' own question texts and gold)")
    parser.add_argument("--corpus", default=None, type=path_arg,
                        help="a folder of .md/.txt files or a corpus.jsonl: candidates get their document's text "
                             "from it (annotate shows it)")
    parser.add_argument("--seed", type=seed_arg, default=None, metavar="N",
                        help="seed of the order annotators see each question's candidates in (default: a random "
                             "one, recorded in the file)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def _golden(args: argparse.Namespace, nights: list[Any]) -> tuple[Any, str | None]:
    """The golden set for texts and judgments, and where it was found (None: the artifacts alone)."""
    from pytest_ragmetrics.golden import load_golden
    from pytest_ragmetrics.tools.harvest import check_golden_version
    from pytest_ragmetrics.tools.pool import recorded_golden

    if args.golden is not None:
        golden = load_golden(args.golden)
        why = check_golden_version(golden, args.golden, nights)
        if why:  # its texts and judgments would be taken for the ones the runs failed
            raise RagMetricsError(f"{why}; pass the golden set the artifacts ran (a checkout of the commit they "
                                  "ran), or leave --golden out to take texts and gold from the artifacts")
        return golden, args.golden
    named = next(((n.golden, n.path) for n in reversed(nights) if n.golden), None)
    if named is None:
        return None, None
    found, _ = recorded_golden(*named)
    if found is None:
        print(f"note: the golden set the runs name, {shown(named[0])}, is not found here; texts and gold come from "
              "the artifacts (pass --golden PATH for every judgment)")
        return None, None
    golden = load_golden(found)
    why = check_golden_version(golden, str(found), nights)
    if why:
        print(f"note: {shown(why)}; texts and gold come from the artifacts (pass --golden PATH of the set they ran "
              "for every judgment)")
        return None, None
    return golden, str(found)


def run(args: argparse.Namespace) -> int:
    from pytest_ragmetrics.gate.artifact import load_artifact
    from pytest_ragmetrics.tools.harvest import Night, check_one_golden, harvest, night_names, run_of
    from pytest_ragmetrics.tools.pool import fill_texts, textless_note, write_pool
    from pytest_ragmetrics.tools.sources import Source

    twice = sorted({p for p in args.artifacts if args.artifacts.count(p) > 1})
    if twice:
        raise RagMetricsError(f"{twice[0]} is given twice; give each run artifact once")
    out = Path(args.out)
    # an input is never overwritten, --force or not
    check_outputs(args, [*(("a run artifact", path) for path in args.artifacts), ("the golden set (--golden)",
                                                                                args.golden),
                         ("the corpus (--corpus)", args.corpus)])
    check_output(out, example="candidates.jsonl")
    if out.exists() and not args.force:
        raise RagMetricsError(f"{out} already exists; pass --force to overwrite it (it may hold annotations)")
    names = night_names(args.artifacts)
    nights = [Night(path, name, load_artifact(path)) for path, name in zip(args.artifacts, names)]
    nights.sort(key=lambda n: n.created)
    check_one_golden(nights)
    golden, golden_path = _golden(args, nights)
    if golden_path:
        check_outputs(args, [("the golden set the runs name", golden_path)])
    for once in run_of(nights)[1]:
        print(f"note: {shown(once)}")
    found = harvest(nights, golden)
    if found.textless:
        print(f"note: {counted(len(found.textless), 'failed question')} left out: no text in the artifacts"
              f"{'' if golden is None else ' nor in ' + str(golden_path)}: {listed(found.textless)}")
    if found.empty:
        print(f"note: {counted(len(found.empty), 'failed question')} left out: nothing to judge (no document "
              f"returned on any failing run, and no gold known): {listed(found.empty)}")
    if not found.pooled:
        print(f"Nothing to harvest: no question regressed, errored, was inconclusive or leaked in "
              f"{counted(len(nights), 'run artifact')}; {out} not written.")
        return 0
    sources = [Source(n.name, "run", n.path) for n in nights]
    if args.corpus is not None:
        from pytest_ragmetrics.corpus import load_corpus

        texts = {d.doc_id: f"{d.title}\n{d.text}" if d.title else d.text for d in load_corpus(args.corpus)}
        absent = fill_texts(found.pooled, sources, texts)
        if absent:
            qid, doc = absent[0]
            print(f"note: {len(absent)} candidates are not in the corpus {args.corpus}, e.g. {shown(repr(doc))} for "
                  f"{shown(repr(qid))}")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    depth = max((len(p.candidates) for p in found.pooled), default=1)
    path = write_pool(found.pooled, out, sources=sources, seed=seed, depth=depth, force=args.force,
                      made_by="ragmetrics harvest")
    by_verdict = {v: sum(1 for vs in found.verdicts.values() if v in vs) for v in ("regressed", "errored",
                                                                                 "inconclusive", "leak")}
    pairs = sum(len(p.candidates) for p in found.pooled)
    carried = sum(1 for p in found.pooled for c in p.candidates if c.rel is not None)
    # a question that regressed one night and errored another counts under both
    how = ', '.join(f'{n} {v}' for v, n in by_verdict.items() if n)
    if sum(by_verdict.values()) > len(found.pooled):
        how = f"failed as: {how}; a question that failed more than one way counts under each"
    runs = "" if found.runs == len(nights) else f" ({counted(found.runs, 'run')})"
    print(f"Harvested {counted(len(found.pooled), 'question')} from {counted(len(nights), 'run artifact')}{runs} "
          f"({how}; a question failed on more runs comes "
          f"first), {counted(pairs, 'candidate')} to judge ({carried} with a known grade, asked again blind), "
          "each question marked source: harvested:")
    for p in found.pooled[:10]:
        record = found.record(p.qid)
        print(f"  {shown(p.qid)}: failed on {record['failed']} of {record['of']} runs "
              f"({', '.join(record['verdicts'])}), {counted(len(p.candidates), 'candidate')}")
    if len(found.pooled) > 10:
        print(f"  … and {len(found.pooled) - 10} more (all in {path})")
    if found.out_of_scope:
        left = sum(map(len, found.out_of_scope.values()))
        print(f"note: {counted(left, 'returned document')} outside {'its' if left == 1 else 'their'} question's "
              f"scope left out of the candidates (known not relevant; the leak gate fails them): "
              f"{listed([f'{q} ({len(d)})' for q, d in found.out_of_scope.items()])}")
    note = textless_note(found.pooled)
    if note:
        print(note)
    merge = (f"`ragmetrics export --golden {golden_path} --merge JUDGMENTS --golden-out {golden_path} --force` "
             "(a question the set already holds keeps its own source)") if golden_path else \
        "`ragmetrics export --golden GOLDEN --merge JUDGMENTS --golden-out GOLDEN --force`"
    print(f"Wrote {path}. Judge them with `ragmetrics annotate {path}`, then merge the judgments into a golden set "
          f"with {merge}. Harvested questions over-fit known failures: the report warns when they exceed "
          "max_harvested_share (default 0.3) of a golden set.")
    return 0
