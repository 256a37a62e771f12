"""pytest hooks and options for ``--rag-eval``; all logic lives in the private modules.

Without ``--rag-eval`` every hook returns at once and nothing heavy is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR

if TYPE_CHECKING:
    from pytest_ragmetrics.protocol import Retriever

_INI = {
    "rag_golden": ("golden set: YAML, JSONL, a queries.jsonl+qrels folder or qrels file", "eval/golden.yaml"),
    "rag_baseline": ("baseline file", "baselines/baseline.json"),
    # No default value: a path the user sets must exist, while the conventional
    # baselines/thresholds.json is read only when present (else the defaults apply).
    "rag_thresholds": ("thresholds file; a path set here must exist (unset: baselines/thresholds.json "
                       "when present, else the default tolerances)", None),
    "rag_metrics": ("metrics, e.g. 'recall@10 ndcg@10' (default recall, hit_rate, mrr, ndcg at rag_k)", ""),
    "rag_k": ("results asked of the retriever per query (default: deepest metric cutoff, or 10)", ""),
    "rag_relevance_level": ("grade >= this counts as relevant (default 1)", "1"),
    "rag_gain": ("nDCG gain: exponential (default) or linear", "exponential"),
    "rag_id_separator": ("ranked ids map to documents by the prefix before this ('none' to keep ids)", DEFAULT_ID_SEPARATOR),
    "rag_judgments": ("how the golden set was judged, overriding its own declaration: closed (unlisted documents "
                      "are not relevant) or pooled (unlisted documents are unjudged)", ""),
    "rag_subset": ("default subset: full or smoke", "full"),
    "rag_smoke": ("smoke subset rule: tag:NAME, sample:N or sample:N:SEED", "tag:smoke"),
    "rag_corpus": ("corpus the retriever indexes; gold ids it lacks and golden questions found in it are warned "
                   "about", ""),
    "rag_timeout": ("seconds (> 0) one query's retrieval may take before its item errors (default: no limit)", ""),
    "rag_answer_threshold": ("retriever score at or above which a result counts as an answer: a question marked "
                             "answerable: false that gets one is a false retrieval (default: any result is)", ""),
    "rag_setup_timeout": ("seconds (> 0) the rag_retriever fixture may take to build the retriever before the run "
                          "stops (default: no limit)", ""),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragmetrics", "retrieval regression gating (pytest-ragmetrics)")
    group.addoption("--rag-eval", action="store_true", default=False,
                    help="run the golden set through rag_retriever, one test item per query, and gate on the baseline")
    group.addoption("--rag-golden", dest="rag_golden", metavar="PATH", help="golden set (overrides ini rag_golden)")
    group.addoption("--rag-baseline", dest="rag_baseline", metavar="PATH", help="baseline.json (overrides ini)")
    group.addoption("--rag-thresholds", dest="rag_thresholds", metavar="PATH",
                    help="thresholds.json, which must exist (overrides ini)")
    group.addoption("--rag-metrics", dest="rag_metrics", metavar="LIST", help="metrics, comma or space separated")
    group.addoption("--rag-k", dest="rag_k", metavar="K", help="results asked of the retriever per query")
    group.addoption("--rag-relevance-level", dest="rag_relevance_level", metavar="L")
    group.addoption("--rag-gain", dest="rag_gain", choices=("exponential", "linear"))
    group.addoption("--rag-id-separator", dest="rag_id_separator", metavar="SEP")
    group.addoption("--rag-judgments", dest="rag_judgments", choices=("closed", "pooled"),
                    help="how the golden set was judged: closed (unlisted documents are not relevant) or pooled "
                         "(unlisted documents are unjudged); overrides the golden set and ini rag_judgments")
    group.addoption("--rag-subset", dest="rag_subset", choices=("smoke", "full"),
                    help="smoke: the subset chosen by ini rag_smoke (pull requests); full: everything (nightly)")
    group.addoption("--rag-update-baseline", action="store_true", default=False,
                    help="after a full run, rewrite the baseline atomically and print what changed")
    group.addoption("--rag-allow-missing-gold", action="store_true", default=False,
                    help="let --rag-update-baseline write a baseline although relevant gold ids are not in the "
                         "corpus (--rag-corpus or the retriever's doc_ids()); the baseline lists them in "
                         "_meta.allowed_missing_gold")
    group.addoption("--rag-accept-mismatch", action="store_true", default=False,
                    help="compare with a baseline measured under another config or judgments anyway")
    group.addoption("--rag-report", dest="rag_report", metavar="PATH", help="write the JSON run artifact here")
    group.addoption("--rag-html", dest="rag_html", metavar="PATH",
                    help="write a self-contained HTML report (charts, worst-N table) here")
    group.addoption("--rag-markdown", dest="rag_markdown", metavar="PATH",
                    help="append the verdict as Markdown here (also to $GITHUB_STEP_SUMMARY when set)")
    group.addoption("--rag-corpus", dest="rag_corpus", metavar="PATH",
                    help="check the gold ids against this corpus (a gold id it lacks is reported) and the golden "
                         "questions for leakage (overrides ini rag_corpus)")
    group.addoption("--rag-worst", dest="rag_worst", type=int, metavar="N", help="worst regressed queries to list")
    group.addoption("--rag-repeat", dest="rag_repeat", type=int, default=1, metavar="N",
                    help="run each query N times; an item fails if its ranking changes")
    group.addoption("--rag-batch-size", dest="rag_batch_size", type=int, default=32, metavar="N",
                    help="queries per search_batch call when the retriever offers one (not used with --rag-timeout)")
    group.addoption("--rag-timeout", dest="rag_timeout", metavar="SECONDS",
                    help="a query whose retrieval takes longer (> 0; 'none': no limit, the default) errors and "
                         "the rest run; each query is then searched alone (search_batch is not used) from a "
                         "worker thread, where a hung call is abandoned (it cannot be killed) and the next call "
                         "waits for it to return (one limit more, outside its own; queries still blocked then are "
                         "not run), unless the retriever has thread_safe = True; overrides ini rag_timeout")
    group.addoption("--rag-answer-threshold", dest="rag_answer_threshold", metavar="SCORE",
                    help="a result scoring at or above this counts as an answer to a question marked answerable: "
                         "false (a false retrieval); overrides ini rag_answer_threshold")
    group.addoption("--rag-setup-timeout", dest="rag_setup_timeout", metavar="SECONDS",
                    help="stop the run when the rag_retriever fixture takes longer than this to build the "
                         "retriever (> 0; 'none': no limit, the default); overrides ini rag_setup_timeout")
    for name, (help_text, default) in _INI.items():
        parser.addini(name, help_text, default=default)


def _rag(config: pytest.Config) -> Any:
    if not config.getoption("rag_eval"):
        return None
    from pytest_ragmetrics._plugin.items import RAG_SESSION

    return config.stash.get(RAG_SESSION, None)


@pytest.hookimpl(tryfirst=True, specname="pytest_configure")
def pytest_configure_worker_restarts(config: pytest.Config) -> None:
    """Before pytest-xdist reads it: with a setup timeout, a worker it ended is not replaced.

    A replacement would build the same retriever and hang the same way, once per
    restart xdist allows (4 per worker), so the run would take that many timeouts
    to end. ``--max-worker-restart`` given by the user is kept.
    """
    if not config.getoption("rag_eval") or getattr(config.option, "maxworkerrestart", "") is not None:
        return
    raw = config.getoption("rag_setup_timeout") or config.getini("rag_setup_timeout")
    if str(raw or "").strip().lower() not in ("", "none"):
        config.option.maxworkerrestart = "0"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("rag_eval"):
        return
    from pytest_ragmetrics.errors import RagMetricsError
    from pytest_ragmetrics._plugin.items import RAG_SESSION
    from pytest_ragmetrics._plugin.options import build_options
    from pytest_ragmetrics._plugin.session import RagSession

    ini_base = config.inipath.parent if config.inipath else config.rootpath
    cwd = config.invocation_params.dir

    def get(flag: str, ini: str) -> Any:
        if flag:
            return config.getoption(flag)
        return config.getini(ini)

    def resolve(value: str, from_cli: bool) -> Path:
        return (cwd if from_cli else ini_base) / value

    _refuse_misread_rootdir(config)
    try:
        from pytest_ragmetrics.progress import settings as progress_settings

        progress_settings()  # RAGMETRICS_PROGRESS*: a bad value stops the run now, not at the first query
        options = build_options(get, resolve)
        rag = config.stash[RAG_SESSION] = RagSession(options, hasattr(config, "workerinput"), config.rootpath)
    except RagMetricsError as exc:
        raise pytest.UsageError(f"ragmetrics: {exc}") from None
    # The golden set is collected like any test file: without explicit paths it is
    # the only thing collected (not the project's test suite), with them it joins them.
    golden = str(rag.options.golden)
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [golden]
    elif golden not in config.args:
        config.args.append(golden)


_PATH_FLAGS = ("--rag-golden", "--rag-baseline", "--rag-thresholds", "--rag-report", "--rag-html", "--rag-markdown",
               "--rag-corpus")


def _refuse_misread_rootdir(config: pytest.Config) -> None:
    """Refuse ``--rag-report /elsewhere/run.json`` (a path flag, a space, a path
    outside the current directory) on every run, whether the path exists or not.

    pytest picks its rootdir and ini file before any plugin's options are known,
    so it takes the value for a test path; once the file exists (from the run
    before) the rootdir moves next to it and the ini file is lost. A plugin cannot
    take part in that choice, so the only behaviour that is the same on every run
    is to refuse the spelling and name the one that always works, ``FLAG=PATH``.
    A path inside the current directory cannot move the rootdir and is accepted.
    """
    args = list(config.invocation_params.args)
    cwd = config.invocation_params.dir.resolve()
    for flag, value in zip(args, args[1:]):
        if flag not in _PATH_FLAGS:
            continue
        path = (cwd / value).resolve()
        if path != cwd and cwd not in path.parents:
            raise pytest.UsageError(
                f"ragmetrics: pytest picks its rootdir before plugin options are known, so it takes a path "
                f"outside the current directory after {flag} for a test path, and once that file exists "
                f"the rootdir moves and the ini file is lost; write it as {flag}={value}"
            )


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    rag = _rag(config)
    if rag is None:
        return None
    base = "none (the baseline gate fails)" if rag.baseline is None else str(rag.options.baseline)
    if rag.options.update_baseline:
        base = f"{rag.options.baseline} (being updated)"
    if rag.thresholds.path:
        thresholds = rag.thresholds.path
    elif rag.options.thresholds:
        thresholds = f"defaults (no {rag.options.thresholds})"
    elif rag.unused_thresholds is not None:
        thresholds = f"defaults (rag_thresholds is empty: {rag.unused_thresholds} is not used)"
    else:
        thresholds = "defaults"
    from pytest_ragmetrics.evaluation import id_rule

    subset = f"smoke: {rag.options.smoke_rule}" if rag.options.subset == "smoke" else rag.options.subset

    ids = id_rule(rag.config.id_separator)
    return [
        f"ragmetrics: {len(rag.golden)} of {len(rag.full_golden)} queries ({subset}) "
        f"from {rag.options.golden}",
        f"ragmetrics: metrics {' '.join(rag.metrics)}, k={rag.options.k}, relevance level "
        f"{rag.config.relevance_level}, gain {rag.config.gain}; baseline {base}"
        + (f"; timeout {rag.options.timeout:g} s per query" if rag.options.timeout else "")
        + (f"; setup timeout {rag.options.setup_timeout:g} s" if rag.options.setup_timeout else ""),
        f"ragmetrics: thresholds {thresholds}; {ids}",
        f"ragmetrics: {rag.gold_header()}",
        *([f"ragmetrics: {rag.labels.header()}"] if rag.labels is not None else []),
        f"ragmetrics: judgments {rag.full_golden.judgments} ({rag.full_golden.judgments_from}): "
        + ("documents the golden set does not list are unjudged; judged@k, unjudged_new@k and upper bounds "
           "are shown, and a drop they explain is inconclusive" if rag.pooled else
           "documents the golden set does not list count as not relevant"),
    ]



def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    rag = _rag(parent.config)
    if rag is not None and file_path == rag.collect_path:
        from pytest_ragmetrics._plugin.items import GoldenFile

        return GoldenFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if _rag(config) is not None and not hasattr(config, "workerinput"):
        from pytest_ragmetrics._plugin.controller import Controller

        config.pluginmanager.register(Controller(config), "ragmetrics-controller")


@pytest.fixture(scope="session")
def rag_retriever(request: pytest.FixtureRequest) -> Retriever:
    """Override this fixture (session scope, in conftest.py) to give the plugin your retriever.

    It returns a :class:`pytest_ragmetrics.Retriever`: an object with ``search(query: str, k: int)`` returning ranked
    results, best first (``str`` ids, ``(id, score)`` pairs, objects with an
    ``.id`` or mappings with ``"id"``), and optionally ``search_batch(queries, k)``
    (:class:`pytest_ragmetrics.BatchRetriever`). With ``--rag-timeout``
    each query gets its own ``search`` call (a batch cannot be timed query by
    query) from a worker thread, one call at a time, even while
    a call abandoned at its deadline still runs; a class attribute
    ``thread_safe = True`` lets the next call start beside it.
    """
    from pytest_ragmetrics._plugin.retriever import MISSING, PROTOCOL, retriever_problem

    if request.config.getoption("rag_eval"):
        return cast("Retriever", MISSING)  # the first query reports it, once for the whole run
    pytest.fail(f"ragmetrics: {retriever_problem(MISSING)}. {PROTOCOL}", pytrace=False)
