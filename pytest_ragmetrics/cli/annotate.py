"""``ragmetrics annotate CANDIDATES``: a local page for graded relevance judgments, and adjudication."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pytest_ragmetrics.cli.argtypes import check_outputs, output_argument, path_arg
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.output_paths import JUDGMENTS

HELP = "judge pooled candidates 0/1/2 in a local page (or adjudicate two annotators' disagreements)"

DESCRIPTION = """\
Serves a page on 127.0.0.1 for grading each pooled candidate of a candidates file
(written by `ragmetrics pool`): 2 fully answers the question, 1 partially relevant,
0 not relevant. Every grade is saved at once to the annotator's own JSONL file
(default <candidates stem>.<annotator>.jsonl beside the candidates), which
`ragmetrics agreement` and the plugin read as a golden set; starting again resumes
it. With --adjudicate A B --out ADJ, the page shows only the pairs A and B grade
differently, and writes ADJ with the agreements carried over."""


def register(verbs: Any) -> None:
    parser = verbs.add_parser("annotate", help=HELP, description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(command=run)
    parser.add_argument("candidates", metavar="CANDIDATES", type=path_arg,
                        help="the candidates file (JSONL from ragmetrics pool)")
    parser.add_argument("--annotator", metavar="NAME",
                        help="who judges (letters, digits, '.', '_', '-'); names the output file")
    output_argument(parser, "--out", writes=JUDGMENTS, metavar="PATH",
                    help="the judgments file (default <candidates stem>.<annotator>.jsonl beside the candidates; "
                         "required with --adjudicate; never one of the inputs); resumed when it exists")
    parser.add_argument("--corpus", metavar="PATH", type=path_arg,
                        help="where candidates without text get it: a corpus.jsonl or a folder of .md/.txt files")
    parser.add_argument("--guidelines", metavar="FILE", type=path_arg,
                        help="grading guidelines shown beside the task (Markdown or text, shown as text); "
                             "default: the 0/1/2 definitions")
    parser.add_argument("--adjudicate", nargs=2, metavar=("A", "B"), type=path_arg,
                        help="two annotators' judgments files of these candidates: settle where they disagree")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    parser.add_argument("--open", action="store_true", help="open the page in the default browser")


def _check_outputs(args: argparse.Namespace, default_out: Path | None = None) -> None:
    """The judgments file (--out, or ``default_out`` when --out is not given) is never one of the
    inputs; it is resumed when it exists, by design."""
    adjudicated = args.adjudicate or (None, None)
    check_outputs(args, [("the candidates file", args.candidates), ("the corpus (--corpus)", args.corpus),
                         ("the guidelines (--guidelines)", args.guidelines),
                         ("annotator A's judgments (--adjudicate A B)", adjudicated[0]),
                         ("annotator B's judgments (--adjudicate A B)", adjudicated[1])],
                  also=[("--out", default_out)] if default_out is not None else ())


def _check_writable(out: Path) -> None:
    """Fail now, not at the first grade, when the judgments file cannot be written."""
    folder = next((f for f in [out.parent.resolve(), *out.parent.resolve().parents] if f.exists()), None)
    if folder is None or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise RagMetricsError(f"cannot write {out}: {folder} is not a folder this user may write to")


def run(args: argparse.Namespace) -> int:
    """Check everything, print where to go, serve until Ctrl-C: 0 when stopped; errors raise."""
    from pytest_ragmetrics.annotate import (
        DEFAULT_GUIDELINES,
        JudgmentStore,
        Task,
        compare_judgments,
        default_out,
        read_judgments,
        seed_adjudicated,
        shown_questions,
    )
    from pytest_ragmetrics.annotate.judgments import check_annotator, sha256_text
    from pytest_ragmetrics.files import read_text, write_problem
    from pytest_ragmetrics.tools.candidates import read_candidates

    if not 0 <= args.port <= 65535:
        raise RagMetricsError(f"--port must be 0-65535, got {args.port}")
    _check_outputs(args)  # --out is never an input: before anything is read
    pool = read_candidates(args.candidates)
    args.carried = sum(1 for q in pool.questions for c in q.candidates if c.rel is not None)
    args.made_by = made_by(pool)
    args.empty = [q for q in pool.questions if not q.candidates]
    guidelines = DEFAULT_GUIDELINES
    if args.guidelines is not None:
        guidelines = read_text(Path(args.guidelines))
        if not guidelines.strip():
            raise RagMetricsError(f"{args.guidelines}: the guidelines file is empty")
    digest = sha256_text(guidelines)
    questions = shown_questions(pool, args.corpus)  # every candidate has text, before anything is served

    comparison = None
    if args.adjudicate:
        if args.out is None:
            raise RagMetricsError("--adjudicate needs --out ADJ.jsonl: where the adjudicated judgments go")
        if args.annotator is not None:
            raise RagMetricsError("--annotator is not used with --adjudicate: the file records "
                                  "adjudicated(A,B) from the two annotators' names")
        path_a, path_b = args.adjudicate
        out = Path(args.out)
        _check_writable(out)
        comparison = compare_judgments(pool, read_judgments(path_a, pool), read_judgments(path_b, pool))
        store = JudgmentStore.open(out, pool, annotator=comparison.annotator, candidates_label=args.candidates,
                                   guidelines_sha256=digest)
        store.judgments.extra_meta["adjudicated_from"] = [
            {"annotator": comparison.a.annotator, "file": path_a},
            {"annotator": comparison.b.annotator, "file": path_b}]
        seed_adjudicated(comparison, store.judgments)
        if store.judgments.n_judged() or store.resumed:
            try:
                store.save()
            except OSError as exc:
                raise RagMetricsError(f"cannot write {out}: {write_problem(out, exc)}") from None
        both = len(comparison.agreed) + len(comparison.disagreements)
        print(f"{comparison.a.annotator} ({path_a}) and {comparison.b.annotator} ({path_b}): {both} pairs judged "
              f"by both, {len(comparison.agreed)} agree (carried over), {len(comparison.disagreements)} disagree; "
              f"{len(comparison.one_sided)} judged by one of them only (carried over).")
        if not comparison.disagreements:
            print(f"Nothing to adjudicate; wrote {out}.")
            return 0
    else:
        if args.annotator is None:
            raise RagMetricsError("--annotator NAME is required: each annotator judges into a file of their own")
        name = check_annotator(args.annotator)
        out = Path(args.out) if args.out is not None else default_out(args.candidates, name)
        if args.out is None:
            _check_outputs(args, out)
        _check_writable(out)
        store = JudgmentStore.open(out, pool, annotator=name, candidates_label=args.candidates,
                                   guidelines_sha256=digest)
        if store.resumed and store.previous_guidelines_sha256 not in (None, "", digest):
            print(f"ragmetrics annotate: note: {out} was started under other guidelines; "
                  "the grades made so far are kept", file=sys.stderr)

    task = Task(questions, store, guidelines, comparison)
    from pytest_ragmetrics.annotate.server import AnnotateServer

    try:
        server = AnnotateServer(task, args.port)
    except OSError as exc:
        raise RagMetricsError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    return _serve(server, task, args)


def made_by(pool: Any) -> str:
    """The command that wrote a candidates file: its ``_meta.made_by``, else ``ragmetrics harvest`` for a file
    of harvested questions (written before files said so), else ``ragmetrics pool``."""
    named = pool.meta.get("made_by")
    if isinstance(named, str) and named:
        return named
    return "ragmetrics harvest" if any(q.source == "harvested" for q in pool.questions) else "ragmetrics pool"


def _left(task: Any) -> str:
    p = task.progress()
    what = "disagreements" if task.mode == "adjudicate" else "candidates"
    return (f"{p['questions'] - p['questions_done']} of {p['questions']} questions and "
            f"{p['total'] - p['judged']} of {p['total']} {what} left")


def _serve(server: Any, task: Any, args: argparse.Namespace) -> int:
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: stopping is the caller's business
        previous = None
    try:  # from the first line printed on, Ctrl-C (or SIGTERM) stops cleanly
        who = "Adjudicating" if task.mode == "adjudicate" else f"Annotating as {task.store.judgments.annotator}"
        print(f"{who}: {args.candidates}, {_left(task)}.")
        carried = getattr(args, "carried", 0)
        if carried and task.mode != "adjudicate":
            print(f"{carried} of these candidates {'carries' if carried == 1 else 'carry'} a grade from "
                  f"the golden set, which `{getattr(args, 'made_by', 'ragmetrics pool')}` counted as judged; they "
                  "are asked again, blind, so each annotator's file holds their own grades and agreement is "
                  "measured on them too.")
        empty = getattr(args, "empty", [])
        if empty and task.mode != "adjudicate":
            shown = "; ".join(f"{q.qid} ({q.query!r})" for q in empty[:10]) + (" …" if len(empty) > 10 else "")
            print(f"{len(empty)} {'question has' if len(empty) == 1 else 'questions have'} no candidates, so "
                  f"nothing to judge here and no place in the judgments: {shown}. If nothing in the corpus "
                  "answers one, add it to the golden set with `answerable: false`; else pool it again deeper "
                  "or with another retriever.")
        print(f"Every grade is saved to {task.store.path}.")
        print(f"Open {server.url} (this computer only). Ctrl-C stops.", flush=True)
        if args.open:
            import webbrowser

            threading.Thread(target=webbrowser.open, args=(server.url,), daemon=True).start()
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        task.store.close()  # a grade being saved is finished first
        server.server_close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    where = (f"The judgments are in {task.store.path}." if task.store.path.exists()
             else "No grade was made; nothing was written.")
    print(f"\nStopped; {_left(task)}. {where}", flush=True)
    return 0
