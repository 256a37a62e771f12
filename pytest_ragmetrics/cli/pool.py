"""``ragmetrics pool``: pool the top documents of the systems a team compares, per question, for annotators."""

from __future__ import annotations

import argparse
import secrets
import time
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli._stack import (
    build_stack,
    log,
    parse_modes,
    progress_for,
    quiet_argument,
    stack_arguments,
)
from pytest_ragmetrics.cli.argtypes import check_outputs, module_arg, output_argument, path_arg, seed_arg
from pytest_ragmetrics.errors import RagMetricsError, listed
from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR
from pytest_ragmetrics.output_paths import CANDIDATES
from pytest_ragmetrics.report.tables import counted

DEFAULT_MODES = "bm25,vector,hybrid"


def _source(kind: str) -> Any:
    def parse(raw: str) -> tuple[str, str]:
        return kind, module_arg(raw) if kind == "retriever" else path_arg(raw)
    parse.__name__ = kind  # argparse names the type in its messages
    return parse


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "pool",
        help="pool the top documents of several retrievers, runs or stack modes per question for annotation",
        description="Union and dedup (by document) the top --depth documents of each source per question -- "
                    "your retrievers (--retriever), run files or run artifacts (--run), the reference stack's "
                    "modes over --corpus (--modes) -- and write a candidates file (JSONL) with rel left null "
                    "for annotators, each candidate marked with the sources that found it and their ranks; "
                    "judgments already in --queries are carried over. Prints, per source, how many "
                    "candidates it contributed and how many only it found.",
    )
    parser.set_defaults(command=run)
    parser.add_argument("--queries", type=path_arg,
                        help="a golden set (YAML, JSONL, folder), a candidates file to re-pool, a queries.jsonl, "
                             "or a text file of questions")
    output_argument(parser, "-o", "--out", writes=CANDIDATES, required=True,
                    help="output JSONL (refused if it exists, unless --force; never one of the inputs)")
    parser.add_argument("--unjudged-only", action="store_true",
                        help="with one --run run artifact (pytest --rag-report): write the documents its gate "
                             "unjudged asks to judge (those of the inconclusive queries), or, when it asks for "
                             "none or with --all, every document of each query's top k that the golden set does "
                             "not judge (inconclusive queries first), as candidates for `ragmetrics annotate`; "
                             "--queries is not needed")
    parser.add_argument("--all", action="store_true", dest="all_unjudged",
                        help="with --unjudged-only: every unjudged document of the top k, even when the gate "
                             "asks to judge only some")
    parser.add_argument("--golden", default=None, type=path_arg,
                        help="with --unjudged-only: the golden set the run was judged with (default: the one the "
                             "artifact names in _meta.golden.source)")
    parser.add_argument("--retriever", action="append", dest="sources", type=_source("retriever"),
                        metavar="[NAME=]MODULE:ATTR",
                        help="a source: an object with search(query, k), or a class or zero-argument function "
                             "returning one, imported with the project root first on sys.path; named ATTR "
                             "unless NAME= is given; repeatable")
    parser.add_argument("--run", action="append", dest="sources", type=_source("run"), metavar="[NAME=]FILE",
                        help="a source: a TREC run file or a run artifact (pytest --rag-report); named by the "
                             "file's stem unless NAME= is given; repeatable")
    stack = parser.add_argument_group("the reference stack", "--corpus gives candidates their text; with --modes "
                                      "the stack also searches it (the 'stack' extra)")
    stack_arguments(stack, corpus_required=False,
                    corpus_help="a folder of .md/.txt files, a corpus.jsonl, or a folder holding one: candidates "
                                "get their document's text from it, and --modes search it")
    stack.add_argument("--modes", default=None,
                       help=f"reference-stack modes, comma-separated, each a source named after it (default "
                            f"{DEFAULT_MODES} when --corpus is the only source, else none)")
    stack.add_argument("--fetch-k", type=int, default=30, metavar="N",
                       help="candidates per route before fusion (default 30; raised to --depth)")
    parser.add_argument("--depth", type=int, default=10, metavar="N",
                        help="documents taken from each source (default 10)")
    parser.add_argument("--seed", type=seed_arg, default=None, metavar="N",
                        help="seed of the order annotators see each question's candidates in (default: a random "
                             "one, recorded in the file)")
    parser.add_argument("--id-separator", default=None, metavar="SEP",
                        help="map ranked ids to documents by the prefix before SEP ('none': ids as given); "
                             f"default {DEFAULT_ID_SEPARATOR!r} for retrievers, as the plugin; run files are "
                             "document-level and kept as given unless this is set")
    parser.add_argument("--rootdir", default=".", metavar="DIR", type=path_arg,
                        help="project root put first on sys.path to import --retriever modules (default: the "
                             "current directory)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    quiet_argument(parser)


def _named(kind: str, raw: str) -> tuple[str, str]:
    """(name, spec) of ``--retriever [NAME=]MODULE:ATTR`` or ``--run [NAME=]FILE``."""
    if "=" in raw and not (kind == "run" and Path(raw).exists()):
        name, _, spec = raw.partition("=")
        if not name.strip() or not spec.strip():
            raise RagMetricsError(f"--{kind} {raw!r}: expected NAME={'MODULE:ATTR' if kind == 'retriever' else 'FILE'}")
        return name.strip(), spec.strip()
    if kind == "retriever":
        return raw.rpartition(":")[2].strip().rpartition(".")[2] or raw, raw
    return Path(raw).stem or raw, raw


def _separators(raw: str | None) -> tuple[str | None, str | None]:
    """The id separator for retrievers and for runs."""
    if raw is None:
        return DEFAULT_ID_SEPARATOR, None
    sep = None if raw.strip().lower() in ("", "none") else raw
    return sep, sep


def _check_outputs(args: argparse.Namespace, inputs: list[tuple[str, str | None]]) -> None:
    """Refuse --out when it is one of the inputs (--force or not), before any retrieval."""
    check_outputs(args, [("the questions (--queries)", args.queries), ("the golden set (--golden)", args.golden),
                         ("the corpus (--corpus)", args.corpus), ("the rerank model (--rerank-model)",
                                                                   args.rerank_model),
                         ("the model (--model)", args.model), *inputs])


def run_unjudged(args: argparse.Namespace) -> int:
    """``pool --run run.json --unjudged-only``: a run artifact's unjudged top-k documents, for annotate."""
    from pytest_ragmetrics.gate.artifact import load_artifact
    from pytest_ragmetrics.golden import load_golden
    from pytest_ragmetrics.tools.pool import fill_texts, recorded_golden, textless_note, unjudged_pool, write_pool
    from pytest_ragmetrics.tools.sources import Source

    runs = [spec for kind, spec in args.sources or [] if kind == "run"]
    if len(runs) != 1 or len(args.sources) != 1:
        raise RagMetricsError("--unjudged-only reads one run artifact: give exactly one --run FILE (written by "
                              "pytest --rag-eval --rag-report=FILE), and no other source")
    name, spec = _named("run", runs[0])
    _check_outputs(args, [("the run artifact (--run)", spec)])
    artifact = load_artifact(spec)
    golden_path = args.golden
    if golden_path is None:
        golden_meta = artifact["_meta"].get("golden") or {}
        source = golden_meta.get("source")
        if not source:
            raise RagMetricsError(f"{spec}: the artifact names no golden set (_meta.golden.source); pass --golden")
        found, tried = recorded_golden(source, spec)
        if found is None:
            above = Path(spec).resolve().parent
            where = (f"{tried[0]}" if len(tried) == 1 else
                     f"{tried[0]} (from the current directory), then {tried[1]} and the same under each folder "
                     f"above {above}")
            raise RagMetricsError(f"{spec}: the golden set the run was judged with, {source} (_meta.golden.source, "
                                  f"relative to the project root it ran in), is not found: tried {where}; pass "
                                  "--golden PATH to name it")
        golden_path = str(found)
        _check_outputs(args, [("the golden set the run was judged with", golden_path)])
    out = Path(args.out)
    if out.exists() and not args.force:
        raise RagMetricsError(f"{out} already exists; pass --force to overwrite it (it may hold annotations)")
    golden = load_golden(golden_path)
    asked = len(artifact["comparison"].get("to_judge") or [])
    everything = args.all_unjudged or not asked
    pooled, unknown = unjudged_pool(artifact, golden, name, everything)
    if unknown:
        log(f"note: {counted(len(unknown), 'query', 'queries')} of {spec} {'is' if len(unknown) == 1 else 'are'} "
            f"not in {golden_path} and left out: {listed(unknown)}")
    pairs = sum(len(p.candidates) for p in pooled)
    if not pairs:
        print(f"No unjudged documents: every document in the top {artifact['_meta'].get('k', 'k')} of {spec} is "
              f"judged in {golden_path}; nothing to annotate, {out} not written.")
        return 0
    if args.corpus is not None:
        from pytest_ragmetrics.corpus import load_corpus

        texts = {d.doc_id: f"{d.title}\n{d.text}" if d.title else d.text for d in load_corpus(args.corpus)}
        absent = fill_texts(pooled, [Source(name, "run", spec)], texts)
        if absent:
            qid, doc = absent[0]
            log(f"note: {len(absent)} candidates are not in the corpus {args.corpus}, e.g. {doc!r} for {qid!r}: "
                "does the run search this corpus, with these document ids?")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    path = write_pool(pooled, out, sources=[Source(name, "run", spec)], seed=seed,
                      depth=artifact["_meta"].get("k") or 10, force=args.force)
    what = (f"{counted(pairs, 'unjudged document')} in the top k of {counted(len(pooled), 'query', 'queries')} "
            "(inconclusive queries first)") if everything else (
        f"the {counted(pairs, 'document')} gate unjudged asks to judge, for {counted(len(pooled), 'query', 'queries')} "
        "(--all writes every unjudged document of the top k)")
    note = textless_note(pooled)
    if note:
        print(note)
    print(f"Wrote {path}: {what}. Judge them with "
          f"`ragmetrics annotate {path}`, then merge the grades into the golden set with `ragmetrics export "
          f"--golden {golden_path} --merge JUDGMENTS --golden-out {golden_path} --force`.")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.unjudged_only:
        return run_unjudged(args)
    if args.queries is None:
        raise RagMetricsError("give --queries (the questions to pool for), or --unjudged-only with a run artifact")
    from pytest_ragmetrics.tools.pool import fill_texts, pool_sources, pool_summary, read_queries, write_pool
    from pytest_ragmetrics.tools.sources import (
        Source,
        load_retriever,
        project_on_path,
        retriever_rankings,
        run_rankings,
        stack_rankings,
    )

    given = [(kind, *_named(kind, raw)) for kind, raw in args.sources or []]
    modes: list[str] = []
    if args.modes is not None:
        if args.corpus is None:
            raise RagMetricsError("--modes searches the reference stack over a corpus: give --corpus too")
        modes = parse_modes(args.modes)
    elif args.corpus is not None and not given:  # the corpus alone: pool the stack's usual modes
        modes = parse_modes(DEFAULT_MODES)
    if not given and not modes:
        raise RagMetricsError("no source to pool from: give --retriever MODULE:ATTR, --run FILE, or --corpus "
                              "(with --modes) for the reference stack; each is repeatable and they combine")
    names = [name for _, name, _ in given] + modes
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        specs = [spec for _, name, spec in given if name == twice[0]] + [m for m in modes if m == twice[0]]
        raise RagMetricsError(f"two sources are named {twice[0]!r} ({', '.join(specs)}): name them apart with "
                              "NAME=, e.g. --retriever small=mymodule:small_chunks")
    if args.depth < 1:
        raise RagMetricsError(f"--depth must be >= 1, got {args.depth}")
    _check_outputs(args, [(f"the run {name!r} (--run)", spec) for kind, name, spec in given if kind == "run"])
    out = Path(args.out)
    if out.exists() and not args.force:  # before any retrieval: it may hold an annotator's work
        raise RagMetricsError(f"{out} already exists; pass --force to overwrite it (it may hold annotations)")
    if any(m.endswith("+rerank") for m in modes) and args.rerank_model is None:
        raise RagMetricsError("a +rerank mode needs --rerank-model PATH (a CrossEncoder folder)")
    retriever_sep, run_sep = _separators(args.id_separator)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)

    progress = progress_for(args)
    queries = read_queries(args.queries)
    questions = [(q.qid, q.text) for q in queries]
    filters = {q.qid: q.filters for q in queries if q.filters}  # replayed to every retriever, as the gate sends them
    qids = [q.qid for q in queries]
    ranked: dict[str, Any] = {}
    # Run files first: reading them is cheap, and a wrong file should stop the command before any search.
    for kind, name, spec in given:
        if kind != "run":
            continue
        r = ranked[name] = run_rankings(spec, qids, args.depth, run_sep, name)
        if r.ignored:
            log(f"warning: run {name!r} ({spec}): ignoring {counted(len(r.ignored), 'query', 'queries')} that "
                f"the questions do not hold: {listed(r.ignored)}")
        if r.missing:
            log(f"note: run {name!r} ({spec}) ranks nothing for {len(r.missing)} of {len(qids)} questions: "
                f"{listed(r.missing)}")
    if any(kind == "retriever" for kind, _, _ in given):
        with project_on_path(args.rootdir) as root:
            for kind, name, spec in given:
                if kind != "retriever":
                    continue
                retriever = load_retriever(spec, root)
                t0 = time.perf_counter()
                ranked[name] = retriever_rankings(Source(name, "retriever", spec), retriever, questions,
                                                  args.depth, retriever_sep, progress=progress, filters=filters)
                if not args.quiet:
                    log(f"retriever {name}: {len(questions)} questions in {time.perf_counter() - t0:.2f} s")
    documents = None
    stack: list[Any] = []
    if modes:
        _, retriever = build_stack(args, modes, [], fetch_k=max(args.fetch_k, args.depth), progress=progress)
        t0 = time.perf_counter()
        chunking = f"chunk_size={args.chunk_size or 'whole'} overlap={args.overlap if args.chunk_size else 0}"
        stack = stack_rankings(retriever, questions, modes, args.depth, spec=f"corpus={args.corpus} {chunking}",
                               progress=progress, filters=filters)
        if not args.quiet:
            log(f"stack modes {', '.join(modes)}: {len(questions)} questions in {time.perf_counter() - t0:.2f} s")
        documents = getattr(retriever, "documents", None)
    elif args.corpus is not None:
        from pytest_ragmetrics.corpus import load_corpus

        documents = load_corpus(args.corpus)

    order = [ranked[name] for _, name, _ in given] + stack
    sources = [r.source for r in order]
    pooled = pool_sources(queries, order, args.depth)
    if documents is not None:
        texts = {d.doc_id: f"{d.title}\n{d.text}" if d.title else d.text for d in documents}
        absent = fill_texts(pooled, sources, texts)
        if absent:
            qid, doc = absent[0]
            log(f"note: {len(absent)} candidates are not in the corpus {args.corpus}, e.g. {doc!r} for {qid!r}: "
                "do the sources search this corpus, with these document ids?")
    path = write_pool(pooled, out, sources=sources, seed=seed, depth=args.depth, force=args.force)
    print(pool_summary(pooled, sources, args.depth))
    print(f"Wrote {path} (display order seed {seed}; --seed {seed} reproduces it): fill in each null rel "
          "(0 = not relevant) before using it as a golden set.")
    return 0
