"""``--rag-*`` flags and ``rag_*`` ini keys: declared once in :data:`OPTIONS`, resolved into one
:class:`RagOptions`.

``plugin.py`` registers every flag and ini key from :data:`OPTIONS`, and a test
holds the options table in docs/configuration.md to it. Flags win over ini keys; paths from the
command line are relative to the invocation directory, paths from the ini file to the ini file's
folder. Every
value is checked here, before anything is loaded or retrieved.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pytest_ragmetrics.errors import RagMetricsError, visible
from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR, MeasurementConfig, parse_measures
from pytest_ragmetrics.unanswerable import parse_threshold

__all__ = ["OPTIONS", "OptionSpec", "RagOptions", "build_options", "check_outputs", "DEFAULT_THRESHOLDS",
           "PATH_OPTIONS", "THRESHOLDS_DEFAULTS"]

_DEFAULT_K = 10

#: Where the thresholds file usually lives (beside the default baseline). When rag_thresholds is
#: unset, the file read is ``thresholds.json`` beside the baseline in use, which may be absent.
DEFAULT_THRESHOLDS = "baselines/thresholds.json"

#: The value of rag_thresholds (or --rag-thresholds) that gates with the built-in defaults on
#: purpose, in words a reviewer sees; a file of that name is written ``./defaults``.
THRESHOLDS_DEFAULTS = "defaults"

DEFAULT_GOLDEN = "eval/golden.yaml"
DEFAULT_BASELINE = "baselines/baseline.json"

#: Every option whose value is a path: (flag dest, ini key, what it names, how to get the default).
#: An empty value for any of them is refused, never read as "use the default".
PATH_OPTIONS: tuple[tuple[str, str | None, str], ...] = (
    ("rag_golden", "rag_golden", f"name the golden set, or leave it out for the default {DEFAULT_GOLDEN}"),
    ("rag_baseline", "rag_baseline", f"name the baseline file, or leave it out for the default {DEFAULT_BASELINE}"),
    ("rag_thresholds", "rag_thresholds", f"name a thresholds file, write {THRESHOLDS_DEFAULTS!r} to gate with the "
                                         "built-in defaults on purpose, or leave it out to read thresholds.json "
                                         "beside the baseline"),
    ("rag_corpus", "rag_corpus", "name the corpus, or leave it out to check against none"),
    ("rag_report", None, "name the file, or leave the flag out"),
    ("rag_html", None, "name the file, or leave the flag out"),
    ("rag_markdown", None, "name the file, or leave the flag out"),
)


@dataclass(frozen=True)
class OptionSpec:
    """One option as pytest registers it and the docs table shows it: a ``--rag-*`` flag, a
    ``rag_*`` ini key, or both (the flag wins)."""

    flag: str | None  # "--rag-golden"; None for an ini-only key
    ini: str | None  # "rag_golden"; None for a flag-only option
    help: str = ""  # the flag's line in --help
    ini_help: str = ""  # the ini key's line in --help
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False  # a flag without a value (store_true)
    type: Callable[[str], Any] | None = None
    flag_default: Any = None
    #: the ini key's default; None (rag_thresholds only) is told from a value the user set
    ini_default: str | None = None
    #: the default column of the docs table when it is not the default value itself
    shown_default: str | None = None

    @property
    def dest(self) -> str:
        """The name ``config.getoption`` and :func:`build_options` know the flag by."""
        return (self.flag or "").removeprefix("--").replace("-", "_")

    def flag_kwargs(self) -> dict[str, Any]:
        """What ``parser.addoption(self.flag, ...)`` is given."""
        if self.switch:
            return {"action": "store_true", "default": False, "dest": self.dest, "help": self.help}
        kwargs: dict[str, Any] = {"dest": self.dest, "help": self.help or None}
        for key in ("metavar", "choices", "type"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        if self.flag_default is not None:
            kwargs["default"] = self.flag_default
        return kwargs

    def usage(self) -> str:
        """The flag as the docs table spells it: ``--rag-k K``, ``--rag-gain exponential\\|linear``."""
        if not self.flag:
            return ""
        value = "\\|".join(self.choices) if self.choices else self.metavar
        return f"{self.flag} {value}" if value else self.flag

    def documented_default(self) -> str:
        """The docs table's default column."""
        if self.shown_default is not None:
            return self.shown_default
        if self.ini_default:
            return f"`{self.ini_default}`"
        if self.flag_default is not None:
            return f"`{self.flag_default}`"
        return ""


#: Every option, in the order of the table in docs/configuration.md.
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("--rag-eval", None, switch=True, shown_default="off",
               help="run the golden set through rag_retriever, one test item per query, and gate on the baseline"),
    OptionSpec("--rag-golden", "rag_golden", metavar="PATH", help="golden set (overrides ini rag_golden)",
               ini_help="golden set: YAML, JSONL, a queries.jsonl+qrels folder or qrels file",
               ini_default=DEFAULT_GOLDEN),
    OptionSpec("--rag-baseline", "rag_baseline", metavar="PATH", help="baseline.json (overrides ini)",
               ini_help="baseline file", ini_default=DEFAULT_BASELINE),
    # No ini default: a path the user sets must exist, while thresholds.json beside the
    # baseline is read only when present (else the defaults apply).
    OptionSpec("--rag-thresholds", "rag_thresholds", metavar="PATH",
               help=f"thresholds.json, which must exist, or '{THRESHOLDS_DEFAULTS}' for the built-in defaults "
                    "(overrides ini)",
               ini_help=f"thresholds file, which must exist; '{THRESHOLDS_DEFAULTS}': the built-in defaults on "
                        "purpose (unset: thresholds.json beside the baseline when present, else the defaults)",
               ini_default=None, shown_default="`thresholds.json` beside the baseline if present, else built-in "
                                               "defaults"),
    OptionSpec("--rag-metrics", "rag_metrics", metavar="LIST", help="metrics, comma or space separated",
               ini_help="metrics, e.g. 'recall@10 ndcg@10' (default recall, hit_rate, mrr, ndcg at rag_k)",
               shown_default="recall, hit_rate, mrr, ndcg at `rag_k`"),
    OptionSpec("--rag-k", "rag_k", metavar="K", help="results asked of the retriever per query",
               ini_help=f"results asked of the retriever per query (default: deepest metric cutoff, or {_DEFAULT_K})",
               shown_default=f"deepest metric cutoff, or {_DEFAULT_K}"),
    OptionSpec("--rag-relevance-level", "rag_relevance_level", metavar="L",
               ini_help="grade >= this counts as relevant (default 1)", ini_default="1"),
    OptionSpec("--rag-gain", "rag_gain", choices=("exponential", "linear"),
               ini_help="nDCG gain: exponential (default) or linear", ini_default="exponential"),
    OptionSpec("--rag-id-separator", "rag_id_separator", metavar="SEP",
               ini_help="ranked ids map to documents by the prefix before this ('none' to keep ids)",
               ini_default=DEFAULT_ID_SEPARATOR),
    OptionSpec("--rag-subset", "rag_subset", choices=("smoke", "full"),
               help="smoke: the subset chosen by ini rag_smoke (pull requests); full: everything (nightly)",
               ini_help="default subset: full or smoke", ini_default="full"),
    OptionSpec(None, "rag_smoke", ini_help="smoke subset rule: tag:NAME, sample:N or sample:N:SEED",
               ini_default="tag:smoke"),
    OptionSpec("--rag-shard", None, metavar="I/N", shown_default="the whole set",
               help="run shard I of N (1-based): a stable share of the queries, dealt by a hash of their ids with "
                    "each first tag spread evenly; per-query checks only, the gates are judged by `ragmetrics "
                    "merge` over every shard's --rag-report (required with it)"),
    OptionSpec("--rag-run-id", None, metavar="ID", shown_default="the CI's run id",
               help="this run's identity, recorded in the artifact's _meta.run_id so `ragmetrics merge` refuses "
                    "a shard of another run (default: the CI's own: GITHUB_RUN_ID, CI_PIPELINE_ID, "
                    "BUILDKITE_BUILD_ID, CIRCLE_WORKFLOW_ID or BUILD_TAG)"),
    OptionSpec("--rag-attempt", None, metavar="N", shown_default="the CI's run attempt",
               help="which attempt of this run this is (1 for the first, more for a re-run job), recorded in the "
                    "artifact's _meta.attempt so `ragmetrics merge` names a retried shard (default: the CI's "
                    "own: GITHUB_RUN_ATTEMPT, or BUILDKITE_RETRY_COUNT + 1)"),
    OptionSpec("--rag-update-baseline", None, switch=True, shown_default="",
               help="after a full run, rewrite the baseline atomically and print what changed"),
    OptionSpec("--rag-accept-mismatch", None, switch=True, shown_default="",
               help="compare with a baseline measured under another config or judgments anyway"),
    OptionSpec("--rag-allow-missing-gold", None, switch=True, shown_default="",
               help="let --rag-update-baseline write a baseline although relevant gold ids are not in the corpus "
                    "(--rag-corpus or the retriever's doc_ids()); the baseline lists them in "
                    "_meta.allowed_missing_gold"),
    OptionSpec("--rag-reason", None, metavar="TEXT", shown_default="",
               help="why --rag-update-baseline lowers the baseline: a refresh that lowers a gated value (a query's "
                    "or a gated mean) writes nothing without it; with it, the reason is recorded in the baseline's "
                    "_meta.lowerings"),
    OptionSpec("--rag-baseline-ref", "rag_baseline_ref", metavar="REF",
               help="compare the baseline with its version at git REF: a gated value lower than there that no "
                    "reason recorded since explains fails gate baseline-lowered (default on a GitHub Actions pull "
                    "request: origin/$GITHUB_BASE_REF, when the clone has it); overrides ini rag_baseline_ref",
               ini_help="git ref whose baseline a lowering is compared with (gate baseline-lowered)",
               shown_default="`origin/$GITHUB_BASE_REF` on a GitHub Actions pull request, else none"),
    OptionSpec("--rag-report", None, metavar="PATH", help="write the JSON run artifact here"),
    OptionSpec("--rag-html", None, metavar="PATH",
               help="write a self-contained HTML report (charts, worst-N table) here"),
    OptionSpec("--rag-markdown", None, metavar="PATH",
               help="append the verdict as Markdown here (also to $GITHUB_STEP_SUMMARY when set)"),
    OptionSpec("--rag-judgments", "rag_judgments", choices=("closed", "pooled"),
               help="how the golden set was judged: closed (unlisted documents are not relevant) or pooled "
                    "(unlisted documents are unjudged); overrides the golden set and ini rag_judgments",
               ini_help="how the golden set was judged, overriding its own declaration: closed (unlisted documents "
                        "are not relevant) or pooled (unlisted documents are unjudged)",
               shown_default="the golden set's"),
    OptionSpec("--rag-corpus", "rag_corpus", metavar="PATH",
               help="check the gold ids against this corpus (a gold id it lacks is reported) and the golden "
                    "questions for leakage (overrides ini rag_corpus)",
               ini_help="corpus the retriever indexes; gold ids it lacks and golden questions found in it are "
                        "warned about",
               ini_default=None, shown_default="none"),
    OptionSpec("--rag-answer-threshold", "rag_answer_threshold", metavar="SCORE",
               help="a result scoring at or above this counts as an answer to a question marked answerable: "
                    "false (a false retrieval); overrides ini rag_answer_threshold",
               ini_help="retriever score at or above which a result counts as an answer: a question marked "
                        "answerable: false that gets one is a false retrieval (default: any result is)",
               shown_default="none"),
    OptionSpec("--rag-timeout", "rag_timeout", metavar="SECONDS",
               help="a query whose retrieval takes longer (> 0; 'none': no limit, the default) errors and "
                    "the rest run; each query is then searched alone (search_batch is not used) from a "
                    "worker thread, where a hung call is abandoned (it cannot be killed) and the next call "
                    "waits for it to return (one limit more, outside its own; queries still blocked then are "
                    "not run), unless the retriever has thread_safe = True; overrides ini rag_timeout",
               ini_help="seconds (> 0) one query's retrieval may take before its item errors (default: no limit)",
               shown_default="no limit"),
    OptionSpec("--rag-setup-timeout", "rag_setup_timeout", metavar="SECONDS",
               help="stop the run when the rag_retriever fixture takes longer than this to build the "
                    "retriever (> 0; 'none': no limit, the default); overrides ini rag_setup_timeout",
               ini_help="seconds (> 0) the rag_retriever fixture may take to build the retriever before the run "
                        "stops (default: no limit)",
               shown_default="no limit"),
    OptionSpec("--rag-worst", None, metavar="N", type=int, help="worst regressed queries to list",
               shown_default="`worst_n`"),
    OptionSpec("--rag-repeat", None, metavar="N", type=int, flag_default=1,
               help="run each query N times; an item fails if its ranking changes"),
    OptionSpec("--rag-batch-size", None, metavar="N", type=int, flag_default=32,
               help="queries per search_batch call when the retriever offers one (not used with --rag-timeout)"),
)


@dataclass(frozen=True)
class RagOptions:
    golden: Path
    baseline: Path
    thresholds: Path | None
    measurement: MeasurementConfig
    k: int
    subset: str
    smoke_rule: str
    update_baseline: bool
    accept_mismatch: bool
    report: Path | None
    html: Path | None
    markdown: Path | None
    corpus: Path | None
    worst: int | None
    repeat: int
    batch_size: int
    timeout: float | None = None  # seconds per query's retrieval; None: no limit
    setup_timeout: float | None = None  # seconds the rag_retriever fixture may take; None: no limit
    thresholds_given: bool = False  # named by the user, so it must exist
    allow_missing_gold: bool = False  # --rag-update-baseline may write gold ids the corpus lacks
    judgments: str | None = None  # closed | pooled, overriding the golden set's own; None: the set's
    judgments_from: str = ""  # "--rag-judgments" or "ini rag_judgments", for the report header
    #: a result scoring under this does not count as a false retrieval (None: any result does)
    answer_threshold: float | None = None
    #: (I, N): run shard I of N of the set (--rag-shard); None: the whole set
    shard: tuple[int, int] | None = None
    #: the run's identity (--rag-run-id, else the CI's run variables); None: not known
    run_id: str | None = None
    #: which attempt of the run this is, 1 for the first (--rag-attempt, else the CI's); None: not known
    attempt: int | None = None
    #: the thresholds file at its usual place (baselines/thresholds.json), told apart from the one read
    usual_thresholds: Path | None = None
    #: why --rag-update-baseline lowers the baseline (--rag-reason); None: not given
    reason: str | None = None
    #: the git ref whose baseline a lowering is compared with (--rag-baseline-ref); None: the default
    baseline_ref: str | None = None
    baseline_ref_from: str = ""  # "--rag-baseline-ref" or "ini rag_baseline_ref", for messages


def _metrics_for(k: int) -> list[str]:
    return [f"recall@{k}", f"hit_rate@{k}", f"mrr@{k}", f"ndcg@{k}"]


def _ini_origin(ini: str) -> str:
    return f"ini {ini}"


def build_options(get: Callable[[str, str], Any], resolve: Callable[[str, bool], Path],
                  origin: Callable[[str], str] = _ini_origin) -> RagOptions:
    """Resolve options from ``get(option, ini)`` (flag wins over ini) into RagOptions.

    ``resolve(value, from_cli)`` turns a path into an absolute one; ``origin(ini)`` says how an
    ini key was given (``-o rag_golden=``, ``rag_golden in pytest.ini``), for messages.
    """

    def pick(flag: str, ini: str) -> tuple[Any, bool]:
        """An option's value (the flag wins over the ini key) and whether it came from the command line.
        An empty value, however given, is refused: an unset variable must never mean "the default"."""
        if flag:
            value = get(flag, "")
            if isinstance(value, str) and not value.strip():
                raise RagMetricsError(f"--{flag.replace('_', '-')} was given an empty value (an unset variable?); an "
                                      "empty value is never read as the default: give a value, or leave the option "
                                      "out")
            if value is not None:
                return value, True
        if not ini:
            return None, False
        value = get("", ini)
        if isinstance(value, str) and not value.strip():
            raise RagMetricsError(f"{origin(ini)} is empty (an unset variable?); an empty value is never read as the "
                                  "default: give a value, or leave the key out")
        return value, False

    hints = {dest: hint for dest, _, hint in PATH_OPTIONS}

    def path(flag: str, ini: str | None) -> tuple[str | None, bool]:
        """A path option's value and whether it came from the command line. An empty value,
        however given, is refused: an unset variable must never mean "use the default"."""
        value = get(flag, "")
        if value is not None:
            if not str(value).strip():
                raise RagMetricsError(f"--{flag.replace('_', '-')} was given an empty path (an unset variable?); "
                                      f"an empty value is never read as the default: {hints[flag]}")
            return str(value), True
        if ini is None:
            return None, False
        value = get("", ini)
        if value is not None and not str(value).strip():
            raise RagMetricsError(f"{origin(ini)} is an empty path (an unset variable?); an empty value is never "
                                  f"read as the default: {hints[flag]}")
        return (str(value) if value is not None else None), False

    paths = {flag: path(flag, ini) for flag, ini, _ in PATH_OPTIONS}

    raw_k, _ = pick("rag_k", "rag_k")
    raw_metrics, _ = pick("rag_metrics", "rag_metrics")
    k_given = raw_k not in (None, "")
    try:
        k = int(raw_k) if k_given else None
    except (TypeError, ValueError):
        raise RagMetricsError(f"--rag-k / rag_k must be a positive integer, got {raw_k!r}") from None
    if k is not None and k < 1:
        raise RagMetricsError(f"--rag-k / rag_k must be a positive integer, got {k}")
    names = raw_metrics.split() if isinstance(raw_metrics, str) else list(raw_metrics or [])
    measures = parse_measures(names) if names else parse_measures(_metrics_for(k or _DEFAULT_K))
    depth = MeasurementConfig(measures).depth
    if k is None:
        k = depth or _DEFAULT_K
    level_raw, _ = pick("rag_relevance_level", "rag_relevance_level")
    try:
        level = int(level_raw) if level_raw not in (None, "") else 1
    except ValueError:
        raise RagMetricsError(f"rag_relevance_level must be an integer >= 1, got {level_raw!r}") from None
    gain, _ = pick("rag_gain", "rag_gain")
    sep, _ = pick("rag_id_separator", "rag_id_separator")
    measurement = MeasurementConfig(measures, relevance_level=level, gain=gain or "exponential",
                                    id_separator=sep if sep not in (None, "none") else None)
    golden, g_cli = paths["rag_golden"]
    baseline, b_cli = paths["rag_baseline"]
    baseline_path = resolve(baseline or DEFAULT_BASELINE, b_cli)
    thresholds, t_cli = paths["rag_thresholds"]
    thresholds_given = thresholds is not None  # the ini default is None: only the user sets it
    thresholds_path: Path | None
    if thresholds is None:  # unset: the file beside the baseline in use, when it exists
        thresholds_path = baseline_path.parent / "thresholds.json"
    elif thresholds.strip() == THRESHOLDS_DEFAULTS:  # the built-in defaults, on purpose
        thresholds_path, thresholds_given = None, False
    else:
        thresholds_path = resolve(thresholds, t_cli)
    subset, _ = pick("rag_subset", "rag_subset")
    smoke, _ = pick("", "rag_smoke")
    report, _ = paths["rag_report"]
    html, _ = paths["rag_html"]
    markdown, _ = paths["rag_markdown"]
    corpus, c_cli = paths["rag_corpus"]
    repeat = _count("--rag-repeat", get("rag_repeat", ""), 1, minimum=1)
    batch_size = _count("--rag-batch-size", get("rag_batch_size", ""), 32, minimum=1)
    worst = _count("--rag-worst", get("rag_worst", ""), None, minimum=0)
    raw_timeout, _ = pick("rag_timeout", "rag_timeout")
    timeout = _parse_timeout(raw_timeout)
    raw_setup, _ = pick("rag_setup_timeout", "rag_setup_timeout")
    setup_timeout = _parse_timeout(raw_setup, "--rag-setup-timeout / rag_setup_timeout")
    judgments, j_cli = pick("rag_judgments", "rag_judgments")
    if judgments not in (None, "") and judgments not in ("closed", "pooled"):
        raise RagMetricsError(f"{'--rag-judgments' if j_cli else 'ini rag_judgments'} must be closed or pooled, got "
                              f"{judgments!r} (closed: documents the golden set does not list are not relevant; "
                              "pooled: they are unjudged)")
    raw_answer, _ = pick("rag_answer_threshold", "rag_answer_threshold")
    try:
        answer_threshold = parse_threshold(raw_answer, "--rag-answer-threshold / rag_answer_threshold")
    except ValueError as exc:
        raise RagMetricsError(str(exc)) from None
    raw_shard, _ = pick("rag_shard", "")
    shard = None
    if raw_shard not in (None, ""):
        from pytest_ragmetrics.gate.shard import parse_shard

        shard = parse_shard(raw_shard)
        if paths["rag_report"][0] is None:
            raise RagMetricsError(f"--rag-shard {raw_shard} needs --rag-report=PATH: a shard's gates are judged by "
                                  "`ragmetrics merge` over every shard's artifact, and without one no gate would ever "
                                  "judge this shard's part of the set")
    from pytest_ragmetrics.gate.shard import ci_attempt, ci_run_id

    raw_run_id = get("rag_run_id", "")
    run_id = str(raw_run_id).strip() if raw_run_id is not None else ""
    if raw_run_id is not None and not run_id:
        raise RagMetricsError("--rag-run-id was given an empty id (an unset variable?); give the run's id, or "
                              "leave the option out to take the CI's")
    raw_attempt = get("rag_attempt", "")
    if raw_attempt is not None and not str(raw_attempt).strip():
        raise RagMetricsError("--rag-attempt was given an empty value (an unset variable?); give the attempt "
                              "(1 for the first), or leave the option out to take the CI's")
    attempt = _count("--rag-attempt", str(raw_attempt).strip(), None, minimum=1) if raw_attempt is not None \
        else ci_attempt(os.environ)
    reason, baseline_ref, ref_from = _baseline_trail(get, pick, bool(get("rag_update_baseline", "")))
    corpus_path = resolve(corpus, c_cli) if corpus else None
    if corpus_path is not None and not corpus_path.exists():
        # a typo must not switch the leakage check off with one line at the end of the summary
        raise RagMetricsError(f"--rag-corpus / rag_corpus: {corpus_path}: no such corpus file or folder")
    return RagOptions(
        golden=resolve(golden or DEFAULT_GOLDEN, g_cli),
        baseline=baseline_path,
        thresholds=thresholds_path,
        measurement=measurement,
        k=k,
        subset=subset or "full",
        smoke_rule=smoke or "tag:smoke",
        update_baseline=bool(get("rag_update_baseline", "")),
        accept_mismatch=bool(get("rag_accept_mismatch", "")),
        report=resolve(report, True) if report else None,
        html=resolve(html, True) if html else None,
        markdown=resolve(markdown, True) if markdown else None,
        corpus=corpus_path,
        worst=worst,
        repeat=repeat,
        batch_size=batch_size,
        timeout=timeout,
        setup_timeout=setup_timeout,
        thresholds_given=thresholds_given,
        allow_missing_gold=bool(get("rag_allow_missing_gold", "")),
        judgments=judgments or None,
        judgments_from="--rag-judgments" if j_cli else "ini rag_judgments",
        answer_threshold=answer_threshold,
        shard=shard,
        run_id=run_id or ci_run_id(os.environ),
        attempt=attempt,
        usual_thresholds=resolve(DEFAULT_THRESHOLDS, False),
        reason=reason,
        baseline_ref=baseline_ref,
        baseline_ref_from=ref_from,
    )


def check_outputs(options: RagOptions, ini_file: Path | None, step_summary: str | None,
                  junit_xml: str | None = None) -> None:
    """Refuse, at configure time, an output that is one of the run's inputs (the golden set, the
    baseline, a thresholds file, the corpus, the ini file, a conftest.py), a file of this package,
    or another output (see :func:`pytest_ragmetrics.output_paths.check_output_paths`). pytest's own
    ``--junitxml``, which records every query's metrics, is one of the run's outputs too."""
    from pytest_ragmetrics.output_paths import check_output_paths

    inputs: list[tuple[str, Path | None]] = [
        ("the golden set", options.golden),
        ("the baseline", options.baseline),
        ("the thresholds file", options.thresholds),
        ("a thresholds file", options.usual_thresholds),
        ("the corpus", options.corpus),
        ("the ini file", ini_file),
    ]
    outputs: list[tuple[str, Path | str | None]] = [
        ("--rag-report", options.report), ("--rag-html", options.html), ("--rag-markdown", options.markdown),
        ("--junitxml", junit_xml)]
    if step_summary:  # appended to once when --rag-markdown names it too
        same = options.markdown is not None and os.path.realpath(options.markdown) == os.path.realpath(step_summary)
        if not same:
            outputs.append(("$GITHUB_STEP_SUMMARY", step_summary))
    if options.update_baseline:  # the one input a run rewrites, on purpose
        outputs.insert(0, ("--rag-update-baseline", options.baseline))
    from pytest_ragmetrics.output_paths import ARTIFACT, BASELINE, HTML, JUNIT, MARKDOWN

    check_output_paths(outputs, inputs, may_replace={"--rag-update-baseline": "the baseline"},
                       writes={"--rag-report": ARTIFACT, "--rag-html": HTML, "--rag-markdown": MARKDOWN,
                               "--junitxml": JUNIT, "--rag-update-baseline": BASELINE})


def _baseline_trail(get: Callable[[str, str], Any], pick: Callable[[str, str], tuple[Any, bool]],
                    update_baseline: bool) -> tuple[str | None, str | None, str]:
    """--rag-reason and --rag-baseline-ref / rag_baseline_ref: (reason, ref, which option gave the ref).

    An empty value is refused (an unset variable must not read as "no reason" or "no ratchet"), and so is a
    reason without --rag-update-baseline, which would be ignored without a word."""
    raw_reason = get("rag_reason", "")
    reason = None
    if raw_reason is not None:
        reason = visible(str(raw_reason))
        if not reason:
            raise RagMetricsError("--rag-reason was given an empty reason (an unset variable?); say in words why the "
                                  "baseline goes down: the reason is kept in the baseline for review")
        if not update_baseline:
            raise RagMetricsError("--rag-reason records why --rag-update-baseline lowers the baseline; without "
                                  "--rag-update-baseline it would record nothing")
    if get("rag_baseline_ref", "") == "":
        raise RagMetricsError("--rag-baseline-ref was given an empty ref (an unset variable?); name a git ref such as "
                              "origin/main, or leave the option out")
    raw_ref, from_cli = pick("rag_baseline_ref", "rag_baseline_ref")
    ref = str(raw_ref).strip() if raw_ref not in (None, "") else None
    where = "--rag-baseline-ref" if from_cli else "ini rag_baseline_ref"
    if ref is not None and (ref.startswith("-") or any(c.isspace() or not c.isprintable() for c in ref)):
        raise RagMetricsError(f"{where} must be a git ref (a branch, tag or commit such as origin/main), "
                              f"got {raw_ref!r}")
    return reason, ref, where


def _count(flag: str, raw: Any, default: int | None, minimum: int) -> Any:
    """An integer option; ``None``/empty is the default, anything below ``minimum`` a usage error."""
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or value < minimum:
        raise RagMetricsError(f"{flag} must be an integer >= {minimum}, got {raw!r}")
    return value


def _parse_timeout(raw: Any, name: str = "--rag-timeout / rag_timeout") -> float | None:
    """A timeout option: seconds > 0; empty or ``none`` mean no limit.

    ``0`` is refused rather than read as "no limit": a reader cannot tell which
    of "no time at all" and "no limit" it means.
    """
    if raw in (None, "") or str(raw).strip().lower() in ("none", "off"):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        hint = "; for no limit leave it unset or write 'none'" if value == 0 else ""
        raise RagMetricsError(f"{name} must be a number of seconds > 0 (or 'none'), got {raw!r}{hint}")
    return value
