"""``ragmetrics shadow``: compare two retrievers (or two runs) on the same questions, without labels."""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli import decided
from pytest_ragmetrics.cli._stack import log, progress_for, quiet_argument
from pytest_ragmetrics.cli.argtypes import check_outputs, count_arg, module_arg, output_argument, path_arg, seed_arg
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR
from pytest_ragmetrics.output_paths import CANDIDATES, HTML, SHADOW, check_output
from pytest_ragmetrics.report.tables import counted

HELP = "compare two retrievers or runs without labels: overlap@k, rank-biased overlap, what to label next"


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "shadow", help=HELP,
        description="Run retriever A (production) and B (the candidate) over the same questions, each question's "
                    "filters replayed (search(query, k, filters=...)), or read two run artifacts, and report per "
                    "question overlap@k, rank-biased overlap (RBO_ext, p = 0.9) and the share of B's top k that A "
                    "never returned, most-changed questions first. --candidates writes the most-changed questions' "
                    "documents from both sides for `ragmetrics annotate`: where to label next.")
    parser.set_defaults(command=run)
    parser.add_argument("--a", metavar="[NAME=]MODULE:ATTR", default=None, type=module_arg,
                        help="retriever A (the one in production): an object with search(query, k), or a class or "
                             "zero-argument function returning one, imported with --rootdir first on sys.path")
    parser.add_argument("--b", metavar="[NAME=]MODULE:ATTR", default=None, type=module_arg,
                        help="retriever B (the candidate)")
    parser.add_argument("--run-a", metavar="[NAME=]FILE", default=None, type=path_arg,
                        help="instead of --a/--b: a run artifact (pytest --rag-report) or baseline for A; its _top "
                             "rankings are compared")
    parser.add_argument("--run-b", metavar="[NAME=]FILE", default=None, type=path_arg, help="the run artifact for B")
    parser.add_argument("--queries", default=None, type=path_arg,
                        help="the questions: a query log or a draft from `ragmetrics sample` (JSONL with query, "
                             "optional qid and filters), a golden set, or a text file of questions; required with "
                             "--a/--b, optional with runs (their question texts, and which questions to compare)")
    parser.add_argument("-k", "--k", type=count_arg, default=None, metavar="K",
                        help="compare the top K documents (default 10; with runs, the smaller k they recorded, "
                             "and no more)")
    parser.add_argument("--depth", type=count_arg, default=None, metavar="N",
                        help="ask each retriever for N >= K results, so 'A never returned' looks N deep (default K; "
                             "a retriever may rank its top K differently when asked for more)")
    parser.add_argument("--top", type=count_arg, default=10, metavar="N",
                        help="most-changed questions listed on the terminal (default 10)")
    output_argument(parser, "--html", writes=HTML, default=None, metavar="PATH",
                        help="write a self-contained HTML page (replaced if it exists, as every report; never an "
                             "input file)")
    output_argument(parser, "--json", writes=SHADOW, default=None, metavar="PATH",
                        help="write every number as JSON (replaced if it exists; never an input file)")
    output_argument(parser, "--candidates", writes=CANDIDATES, default=None, metavar="OUT.jsonl",
                        help="write the most-changed questions with both sides' top-K documents as a candidates file "
                             "for `ragmetrics annotate` (refused if it exists, unless --force)")
    parser.add_argument("--label", type=count_arg, default=20, metavar="N",
                        help="how many most-changed questions go to --candidates and get both rankings in --html "
                             "(default 20)")
    parser.add_argument("--corpus", default=None, type=path_arg,
                        help="with --candidates: a folder of .md/.txt files or a corpus.jsonl giving candidates "
                             "their text")
    parser.add_argument("--seed", type=seed_arg, default=None, metavar="N",
                        help="seed of the order annotators see candidates in (default: random, recorded)")
    parser.add_argument("--id-separator", default=None, metavar="SEP",
                        help=f"map ranked ids to documents by the prefix before SEP ('none': as given; default "
                             f"{DEFAULT_ID_SEPARATOR!r}, as the plugin)")
    parser.add_argument("--rootdir", default=".", metavar="DIR", type=path_arg,
                        help="project root put first on sys.path to import --a/--b (default: the current directory)")
    parser.add_argument("--force", action="store_true", help="overwrite --candidates if it exists")
    quiet_argument(parser)


def _named(raw: str, kind: str, default: str) -> tuple[str, str]:
    if "=" in raw and not (kind == "run" and Path(raw).exists()):
        name, _, spec = raw.partition("=")
        if not name.strip() or not spec.strip():
            raise RagMetricsError(f"{raw!r}: expected NAME={'MODULE:ATTR' if kind == 'retriever' else 'FILE'}")
        return name.strip(), spec.strip()
    if kind == "retriever":
        return raw.rpartition(":")[2].strip().rpartition(".")[2] or default, raw
    return Path(raw).stem or default, raw


def _pair(a: tuple[str, str], b: tuple[str, str]) -> tuple[tuple[str, str], tuple[str, str]]:
    """Two sides need two names: when they share one, they are A and B."""
    if a[0] == b[0]:
        return ("A", a[1]), ("B", b[1])
    return a, b


def _check_outputs(args: argparse.Namespace, inputs: list[tuple[str, str | None]]) -> None:
    """Every output path checked before any search: an input file (even with --force), two outputs
    on one file, a folder, a --candidates that exists without --force, a folder that cannot be written."""
    check_outputs(args, inputs)
    outputs = [(option, path) for option, path in (("--json", args.json), ("--html", args.html),
                                                   ("--candidates", args.candidates)) if path is not None]
    for option, path in outputs:
        example = {"--json": "shadow.json", "--html": "shadow.html"}.get(option, "label-next.jsonl")
        # reports are replaced as every verb's are; a candidates file may hold annotations
        check_output(path, force=args.force or option != "--candidates", example=example)


def run(args: argparse.Namespace) -> int:
    """Compare and report: 0 done, 2 bad input (a retriever that does not import, a bad file).

    Every file is written before anything is printed, so a closed pipe (``| head``) loses only
    terminal text."""
    from pytest_ragmetrics.tools.shadow import compare_sides, read_questions, retriever_side, run_side, shadow_text
    from pytest_ragmetrics.tools.sources import Source, load_retriever, project_on_path

    retrievers = args.a is not None or args.b is not None
    runs = args.run_a is not None or args.run_b is not None
    if retrievers == runs:
        raise RagMetricsError("give two retrievers (--a MODULE:ATTR --b MODULE:ATTR) or two runs (--run-a FILE "
                              "--run-b FILE), not both")
    if retrievers and (args.a is None or args.b is None):
        raise RagMetricsError(f"give both --a and --b (missing --{'a' if args.a is None else 'b'})")
    if runs and (args.run_a is None or args.run_b is None):
        raise RagMetricsError(f"give both --run-a and --run-b (missing --run-{'a' if args.run_a is None else 'b'})")
    if retrievers and args.queries is None:
        raise RagMetricsError("--a/--b search questions: give --queries FILE (a query log, a draft from `ragmetrics "
                              "sample`, or a golden set)")
    if runs:
        (name_a, spec_a), (name_b, spec_b) = _pair(_named(args.run_a, "run", "A"), _named(args.run_b, "run", "B"))
    else:
        (name_a, spec_a), (name_b, spec_b) = _pair(_named(args.a, "retriever", "A"), _named(args.b, "retriever", "B"))
    inputs = [("the questions (--queries)", args.queries), ("the corpus (--corpus)", args.corpus)]
    if runs:
        inputs += [("run A (--run-a)", spec_a), ("run B (--run-b)", spec_b)]
    _check_outputs(args, inputs)
    sep: Any = None if args.id_separator is not None and args.id_separator.strip().lower() in ("", "none") else (
        args.id_separator or DEFAULT_ID_SEPARATOR)
    questions = read_questions(args.queries) if args.queries is not None else None
    if questions is not None and any(q.shown is not None for q in questions):
        log(f"note: {args.queries} is read as a raw query log (no qid, no _meta line): its questions are searched "
            "as logged, and shown with personal data redacted in the report and every file written; `ragmetrics "
            "sample` first gives a deduplicated, redacted draft")
    notes: list[str] = []
    if retrievers:
        assert questions is not None
        k = args.k or 10
        depth = max(k, args.depth or k)
        progress = progress_for(args)
        with project_on_path(args.rootdir) as root:
            found_a = load_retriever(spec_a, root)  # both imported before any search: a typo stops it at once
            found_b = load_retriever(spec_b, root)
            side_a = retriever_side(Source(name_a, "retriever", spec_a), found_a, questions, depth, sep, progress)
            side_b = retriever_side(Source(name_b, "retriever", spec_b), found_b, questions, depth, sep, progress)
    else:
        from pytest_ragmetrics.tools.shadow import _RECORDED

        run_sep = _RECORDED if args.id_separator is None else sep
        side_a, k_a = run_side(spec_a, name_a, run_sep)
        side_b, k_b = run_side(spec_b, name_b, run_sep)
        recorded = {spec: x for spec, x in ((spec_a, k_a), (spec_b, k_b)) if x is not None}
        k = args.k or (min(recorded.values()) if recorded else 10)
        deeper = {spec: x for spec, x in recorded.items() if k > x}
        if deeper:
            spec, x = next(iter(deeper.items()))
            raise RagMetricsError(f"-k {k} is deeper than {spec} recorded (k = {x}): its rankings hold at most {x} "
                                  f"documents, so its lists would read as short; use -k {min(recorded.values())} "
                                  "or less")
        if k_a is not None and k_b is not None and k_a != k_b:
            notes.append(f"the runs were recorded at different k ({name_a}: {k_a}, {name_b}: {k_b}): compared on "
                         f"the top {k}")
        if questions is None:
            from pytest_ragmetrics.tools.shadow import ShadowQuery

            # every query either run holds, so a query one of them lacks (or errored on) is named, not skipped
            qids = list(dict.fromkeys([*side_a.rankings, *side_a.missing, *side_b.rankings, *side_b.missing]))
            questions = [ShadowQuery(q, q) for q in qids]
        elif not any(q.qid in side_a.rankings or q.qid in side_b.rankings for q in questions):
            raise RagMetricsError(f"none of the questions of {args.queries} is in {spec_a} or {spec_b}: are they runs "
                                  "of these questions?")
    report = compare_sides(questions, side_a, side_b, k, source=args.queries or "", notes=notes)
    decided(args, 0)  # no check here: a closed pipe or a full disk afterwards is reported, never hidden
    written = []
    if args.json is not None:
        from pytest_ragmetrics.files import atomic_write_json

        atomic_write_json(Path(args.json), report.to_dict())
        written.append(args.json)
    if args.html is not None:
        from pytest_ragmetrics.files import atomic_write_text
        from pytest_ragmetrics.report.shadow import render_shadow_html

        atomic_write_text(Path(args.html), render_shadow_html(report.to_dict(), args.label))
        written.append(args.html)
    said = _write_candidates(args, report, questions) if args.candidates is not None else []
    print(shadow_text(report, args.top))
    if written:
        print(f"Wrote {', '.join(written)}.")
    for line in said:
        print(line)
    return 0


def _write_candidates(args: argparse.Namespace, report: Any, questions: Any) -> list[str]:
    """Write --candidates; what to print about it afterwards."""
    from pytest_ragmetrics.tools.pool import fill_texts, textless_note, write_pool
    from pytest_ragmetrics.tools.shadow import shadow_candidates

    pooled = shadow_candidates(report, args.label, {q.qid: q.tags for q in questions})
    if not pooled:
        return [f"Every question is ranked identically: nothing to label, {args.candidates} not written."]
    sources = [report.a.source, report.b.source]
    if args.corpus is not None:
        from pytest_ragmetrics.corpus import load_corpus

        texts = {d.doc_id: f"{d.title}\n{d.text}" if d.title else d.text for d in load_corpus(args.corpus)}
        absent = fill_texts(pooled, sources, texts)
        if absent:
            qid, doc = absent[0]
            log(f"note: {len(absent)} candidates are not in the corpus {args.corpus}, e.g. {doc!r} for {qid!r}")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    path = write_pool(pooled, args.candidates, sources=sources, seed=seed, depth=report.k, force=args.force,
                      made_by="ragmetrics shadow")
    docs = sum(len(p.candidates) for p in pooled)
    note = textless_note(pooled)
    if note:
        log(note)
    return [f"Wrote {path}: the {counted(len(pooled), 'most-changed question')}, {counted(docs, 'document')} from "
            f"both sides to grade (ragmetrics annotate {path}; display order seed {seed})."]
