"""``ragmetrics export``: a run artifact as a TREC run, a golden set as TREC qrels or golden YAML."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli.argtypes import check_outputs, output_argument, path_arg
from pytest_ragmetrics.errors import InputError, RagMetricsError, brief_repr, shown
from pytest_ragmetrics.files import atomic_write_text
from pytest_ragmetrics.golden import load_golden
from pytest_ragmetrics.output_paths import GOLDEN, TREC_QRELS, TREC_RUN
from pytest_ragmetrics.tools.export import artifact_rankings, golden_yaml, judgments_gaps
from pytest_ragmetrics.trec import write_qrels, write_run

HELP = "write a run artifact as a TREC run, and a golden set as TREC qrels or golden YAML"


def register(verbs: Any) -> None:
    parser = verbs.add_parser("export", help=HELP)
    parser.set_defaults(command=run)
    parser.add_argument("--artifact", type=path_arg, help="run artifact written by --rag-report")
    output_argument(parser, "--run-out", writes=TREC_RUN, help="where to write the TREC run (with --artifact)")
    parser.add_argument("--golden", type=path_arg,
                        help="golden set in any supported format (YAML, JSONL, a queries.jsonl + qrels folder)")
    output_argument(parser, "--qrels-out", writes=TREC_QRELS, help="where to write TREC qrels (with --golden)")
    output_argument(parser, "--yaml-out", writes=GOLDEN,
                    help="where to write the golden set as golden YAML entries (with --golden); "
                                               "the text appends to an existing golden YAML file as it is")
    parser.add_argument("--merge", action="append", default=[], metavar="JUDGMENTS", type=path_arg,
                        help="with --golden and --golden-out: merge the grades of an annotator's (or adjudicated) "
                             "file into the golden set, its grade winning for a document both judge; repeatable")
    parser.add_argument("--accept-changed-text", action="store_true",
                        help="with --merge: merge the grades of a question judged under another text than the "
                             "golden set's (refused by default: they may judge another question); the golden set's "
                             "text is kept")
    output_argument(parser, "--golden-out", writes=GOLDEN,
                    help="where to write the whole (merged) golden set, declaring "
                                                 "judgments: pooled (.yaml/.yml: YAML; else JSONL); it may be "
                                                 "--golden itself, never another input")
    parser.add_argument("--scope-from-filters", action="store_true",
                        help="give each question that has filters but no scope its filters as its scope, in every "
                             "golden file written (--yaml-out, --golden-out): the gate then fails a query that "
                             "returns a document outside them (a leak)")
    parser.add_argument("--corpus", type=path_arg,
                        help="the corpus (a corpus.jsonl with metadata): refuse a relevant gold document outside its "
                             "question's scope before anything is written")
    parser.add_argument("--tag", default="ragmetrics", help="run tag, the sixth column (default ragmetrics)")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files (never an input, "
                                                             "--golden-out over --golden aside)")


_GOLDEN = "the golden set (--golden)"


def _yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def _target(path: str, force: bool) -> Path:
    out = Path(path)
    if out.exists() and not force:
        raise InputError(str(out), None, "exists; pass --force to overwrite it")
    return out


def run(args: argparse.Namespace) -> int:
    golden_out = bool(args.qrels_out or args.yaml_out or args.golden_out)
    if args.merge and not args.golden_out:
        raise RagMetricsError("--merge goes with --golden and --golden-out (the merged golden set is written there)")
    if not (args.artifact and args.run_out) and not (args.golden and golden_out):
        raise RagMetricsError("give --artifact with --run-out, and/or --golden with --qrels-out or --yaml-out")
    if bool(args.artifact) != bool(args.run_out) or bool(args.golden) != golden_out:
        raise RagMetricsError("--artifact goes with --run-out, --golden with --qrels-out and/or --yaml-out")
    # before anything is read: no output is an input, --force or not; --golden-out may replace --golden
    check_outputs(args, [("the run artifact (--artifact)", args.artifact), (_GOLDEN, args.golden),
                         *(("the judgments (--merge)", extra) for extra in args.merge),
                         ("the corpus (--corpus)", args.corpus)], may_replace={"--golden-out": _GOLDEN},
                  writes={"--golden-out": "a golden set", "--yaml-out": "a golden set"})
    # Every output is made in memory first: an id a TREC file cannot hold, or a bad file a note
    # reads, stops the command before anything is written.
    outputs: list[tuple[Path, str, str]] = []
    notes: list[str] = []
    if args.artifact:
        rankings = artifact_rankings(args.artifact)
        out = _target(args.run_out, args.force)
        buffer = io.StringIO()
        write_run(buffer, rankings, tag=args.tag)
        outputs.append((out, buffer.getvalue(),
                        f"wrote {sum(map(len, rankings.values()))} lines for {len(rankings)} queries to {out}"))
    if args.golden:
        golden = original = load_golden(args.golden)
        if args.scope_from_filters:
            golden = queries_set([scope_from_filters(q) for q in golden], golden)
        if args.qrels_out:
            out = _target(args.qrels_out, args.force)
            buffer = io.StringIO()
            write_qrels(buffer, golden.qrels)
            outputs.append((out, buffer.getvalue(),
                            f"wrote {sum(len(q.judgments) for q in golden)} judgments for {len(golden)} queries to "
                            f"{out}"))
        if args.golden_out:
            from pytest_ragmetrics.tools.export import changed_texts, golden_file_text, merge_judgments

            out = _target(args.golden_out, args.force)
            queries, changed = list(golden), []
            for extra in args.merge:
                judged = load_golden(extra)
                notes += [n for n in judgments_gaps(extra) if "no candidates" in n]
                if args.scope_from_filters:
                    judged = queries_set([scope_from_filters(q) for q in judged], judged)
                other = changed_texts(queries_set(queries, golden), judged)
                if other and not args.accept_changed_text:
                    raise InputError(extra, None, f"judges {len(other)} question{'s' if len(other) > 1 else ''} "
                                                  f"under another text than {args.golden}: "
                                                  + "; ".join(f"{brief_repr(q)}: {brief_repr(a)} in {args.golden}, "
                                                              f"{brief_repr(b)} judged" for q, a, b in other[:5])
                                                  + (f" … and {len(other) - 5} more" if len(other) > 5 else "")
                                                  + "; the grades may be for another question: pass "
                                                    "--accept-changed-text to merge them anyway (the golden set's "
                                                    "text is kept)")
                notes += [f"{q}: merged grades judged under another text ({b!r}; kept {a!r})" for q, a, b in other]
                queries, regraded = merge_judgments(queries_set(queries, golden), judged)
                changed += regraded
            check_scope(args, queries)
            notes += [f"regraded {c}" for c in changed]
            text = golden_file_text(queries, out)
            if _yaml(out) and _yaml(Path(args.golden)) and Path(args.golden).is_file():
                from pytest_ragmetrics.tools.export import merged_golden_yaml

                kept = merged_golden_yaml(args.golden, original, queries)
                if kept is not None:  # the golden set's comments and layout, its changed records aside
                    text = kept
                else:
                    notes.append(f"{args.golden}: its comments and layout could not be kept (its list of questions is "
                                 f"empty or in flow style), so {out} is written without them")
            outputs.append((out, text,
                            f"wrote {len(queries)} questions ({sum(len(q.judgments) for q in queries)} judgments, "
                            f"judgments: pooled) to {out}"))
        if args.yaml_out:
            out = _target(args.yaml_out, args.force)
            check_scope(args, golden)
            notes += judgments_gaps(args.golden)
            if golden.judgments == "pooled":  # entries alone would read as a closed set: say how it was judged
                from pytest_ragmetrics.tools.export import golden_file_text

                outputs.append((out, golden_file_text(golden, out, "pooled", as_yaml=True),
                                f"wrote {len(golden)} questions as a golden YAML set declaring judgments: pooled "
                                f"to {out} (add it to a golden set with --golden SET --merge {args.golden} "
                                "--golden-out SET)"))
            else:
                outputs.append((out, golden_yaml(golden), f"wrote {len(golden)} questions as golden YAML to {out}"))
    for out, text, done in outputs:
        atomic_write_text(out, text)
        print(done)
    for note in notes:
        print(f"note: {shown(note)}", file=sys.stderr)
    return 0


def scope_from_filters(query: Any) -> Any:
    """A question with filters and no scope, scoped by its filters (``--scope-from-filters``)."""
    from dataclasses import replace

    return replace(query, scope=dict(query.filters)) if query.filters and not query.scope else query


def check_scope(args: argparse.Namespace, queries: Any) -> None:
    """With ``--corpus``: no relevant gold document outside its question's scope (the gate refuses it too)."""
    if not args.corpus:
        return
    from pytest_ragmetrics.corpus import corpus_metadata, load_corpus
    from pytest_ragmetrics.scope import check_gold_scope

    names = " + ".join([args.golden, *args.merge])
    check_gold_scope(queries, corpus_metadata(load_corpus(args.corpus)), None, names, args.corpus)


def queries_set(queries: list[Any], like: Any) -> Any:
    """Queries as a golden set again (to merge a second file into the first merge)."""
    from pytest_ragmetrics.golden import GoldenSet

    return GoldenSet(like.source, tuple(queries), like.skipped, like.judgments, like.judgments_from)
