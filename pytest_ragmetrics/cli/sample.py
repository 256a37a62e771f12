"""``ragmetrics sample``: draw a draft golden set from a query log (deduplicated, stratified, redacted)."""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from pytest_ragmetrics.cli.argtypes import check_outputs, count_arg, output_argument, path_arg, seed_arg
from pytest_ragmetrics.output_paths import DRAFT, check_output
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.tools.sample import DEFAULT_NEAR, draft_summary, sample_log, write_draft

HELP = "draw an unlabelled draft golden set from a query log: deduplicated, stratified, personal data redacted"


def _share(raw: str) -> float | None:
    if raw.strip().lower() in ("off", "none"):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1] or 'off', got {raw!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1] or 'off', got {raw!r}")
    return value


def register(verbs: Any) -> None:
    parser = verbs.add_parser(
        "sample", help=HELP,
        description="Read a query log (JSONL: one object a line with \"query\", optional \"filters\", \"ts\", "
                    "\"count\" and any field to stratify by), redact personal data, merge exact and near "
                    "duplicates, and draw a seeded sample stratified by --by. Writes a draft golden set "
                    "(source: log, no labels yet) for `ragmetrics pool --queries DRAFT`, then `annotate`.")
    parser.set_defaults(command=run)
    parser.add_argument("log", metavar="LOG.jsonl", type=path_arg, help="the query log, one JSON object a line")
    parser.add_argument("--n", type=count_arg, required=True, metavar="N", help="questions to draw")
    parser.add_argument("--by", default=None, metavar="FIELD",
                        help="stratify by this field of each line (a dotted path reaches into an object, e.g. "
                             "filters.product); each stratum gets a share proportional to its distinct questions, "
                             "at least one. A line without it is an error listing the lines, unless --by-missing")
    parser.add_argument("--by-missing", default=None, metavar="STRATUM",
                        help="sample lines without the --by field (or with null) as the stratum STRATUM, e.g. "
                             "other, instead of refusing the log")
    parser.add_argument("--seed", type=seed_arg, default=None, metavar="S",
                        help="seed of the draw (default: a random one, recorded in the draft's _meta and printed)")
    parser.add_argument("--near", type=_share, default=DEFAULT_NEAR, metavar="SHARE",
                        help="merge questions whose token sets overlap by at least this share (Jaccard; words, "
                             f"character bigrams for CJK); 'off' merges exact duplicates only (default {DEFAULT_NEAR})")
    parser.add_argument("--keep-pii", action="store_true",
                        help="keep e-mail addresses, phone numbers, ID and card numbers, long digit runs, IP and "
                             "MAC addresses as logged (by default they are replaced by [email], [phone], [id], "
                             "[number], [ip], [mac] and counted; ordinary numbers such as years, versions and "
                             "prices are kept either way)")
    output_argument(parser, "-o", "--out", writes=DRAFT, required=True, metavar="DRAFT.jsonl",
                        help="the draft golden set to write (refused if it exists, unless --force; never the log "
                             "itself)")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def run(args: argparse.Namespace) -> int:
    """Draw and write the draft: 0 done, 2 bad input (the message names the file and line)."""
    check_outputs(args, [("the query log", args.log)])  # before the work, --force or not
    check_output(args.out, force=args.force, example="draft.jsonl")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    draft = sample_log(args.log, args.n, by=args.by, seed=seed, by_missing=args.by_missing, near=args.near,
                       keep_pii=args.keep_pii)
    path = write_draft(draft, args.out, force=args.force)
    print(draft_summary(draft))
    print(f"Wrote {path}: {counted(draft.meta['sampled'], 'unlabelled question')} (source: log; --seed {seed} "
          "reproduces it). "
          f"Next: ragmetrics pool --queries {path} --retriever ... -o candidates.jsonl, then ragmetrics annotate.")
    return 0
