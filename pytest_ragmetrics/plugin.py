"""pytest hooks and options for ``--rag-eval``; all logic lives in the private modules.

Without ``--rag-eval`` every hook returns at once and nothing heavy is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.measures import DEFAULT_ID_SEPARATOR

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
    "rag_subset": ("default subset: full or smoke", "full"),
    "rag_smoke": ("smoke subset rule: tag:NAME, sample:N or sample:N:SEED", "tag:smoke"),
    "rag_corpus": ("corpus the retriever indexes; golden questions found in it are warned about", ""),
    "rag_timeout": ("seconds (> 0) one query's retrieval may take before its item errors (default: no limit)", ""),
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
    group.addoption("--rag-subset", dest="rag_subset", choices=("smoke", "full"),
                    help="smoke: the subset chosen by ini rag_smoke (pull requests); full: everything (nightly)")
    group.addoption("--rag-update-baseline", action="store_true", default=False,
                    help="after a full run, rewrite the baseline atomically and print what changed")
    group.addoption("--rag-accept-mismatch", action="store_true", default=False,
                    help="compare with a baseline measured under another config or judgments anyway")
    group.addoption("--rag-report", dest="rag_report", metavar="PATH", help="write the JSON run artifact here")
    group.addoption("--rag-html", dest="rag_html", metavar="PATH",
                    help="write a self-contained HTML report (charts, worst-N table) here")
    group.addoption("--rag-markdown", dest="rag_markdown", metavar="PATH",
                    help="append the verdict as Markdown here (also to $GITHUB_STEP_SUMMARY when set)")
    group.addoption("--rag-corpus", dest="rag_corpus", metavar="PATH",
                    help="check the golden questions against this corpus for leakage (overrides ini rag_corpus)")
    group.addoption("--rag-worst", dest="rag_worst", type=int, metavar="N", help="worst regressed queries to list")
    group.addoption("--rag-repeat", dest="rag_repeat", type=int, default=1, metavar="N",
                    help="run each query N times; an item fails if its ranking changes")
    group.addoption("--rag-batch-size", dest="rag_batch_size", type=int, default=32, metavar="N",
                    help="queries per search_batch call when the retriever offers one")
    group.addoption("--rag-timeout", dest="rag_timeout", metavar="SECONDS",
                    help="a query whose retrieval takes longer (> 0; 'none': no limit, the default) errors and "
                         "the rest run; the retriever is then called from a worker thread, where a hung call is "
                         "abandoned (it cannot be killed) and the next call waits for it to return, unless the "
                         "retriever has thread_safe = True; overrides ini rag_timeout")
    for name, (help_text, default) in _INI.items():
        parser.addini(name, help_text, default=default)


def _rag(config: pytest.Config) -> Any:
    if not config.getoption("rag_eval"):
        return None
    from pytest_ragmetrics._plugin.items import RAG_SESSION

    return config.stash.get(RAG_SESSION, None)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("rag_eval"):
        return
    from pytest_ragmetrics.errors import RagMetricsError
    from pytest_ragmetrics._plugin.items import RAG_SESSION
    from pytest_ragmetrics._plugin.session import RagSession, build_options

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
    else:
        thresholds = "defaults"
    from pytest_ragmetrics.evaluation import id_rule

    ids = id_rule(rag.config.id_separator)
    return [
        f"ragmetrics: {len(rag.golden)} of {len(rag.full_golden)} queries ({rag.options.subset}) "
        f"from {rag.options.golden}",
        f"ragmetrics: metrics {' '.join(rag.metrics)}, k={rag.options.k}, relevance level "
        f"{rag.config.relevance_level}, gain {rag.config.gain}; baseline {base}"
        + (f"; timeout {rag.options.timeout:g} s per query" if rag.options.timeout else ""),
        f"ragmetrics: thresholds {thresholds}; {ids}",
    ]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    rag = _rag(parent.config)
    if rag is not None and file_path == rag.collect_path:
        from pytest_ragmetrics._plugin.items import GoldenFile

        return GoldenFile.from_parent(parent, path=file_path)
    return None


class _Controller:
    """Hooks that run in the process that judges: a serial run or the xdist controller."""

    def __init__(self, config: pytest.Config) -> None:
        from pytest_ragmetrics._plugin.items import RAG_SESSION

        self.config = config
        self.rag = config.stash[RAG_SESSION]
        self.prefix = None  # node id of the golden file, learnt from the first report
        self.retriever_problem: str | None = None

    @pytest.hookimpl(tryfirst=True)  # before junitxml and other report writers see the record
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_ragmetrics.gate.verdict import QueryRecord
        from pytest_ragmetrics._plugin.items import RETRIEVER_PROBLEM_KEY, junit_properties
        from pytest_ragmetrics._plugin.session import RECORD_KEY

        problems = [value for key, value in report.user_properties if key == RETRIEVER_PROBLEM_KEY]
        if problems:  # an xdist worker stopped at its first query
            self.retriever_problem = problems[0]
            report.user_properties = [p for p in report.user_properties if p[0] != RETRIEVER_PROBLEM_KEY]
            return
        records = [value for key, value in report.user_properties if key == RECORD_KEY]
        if records:
            # The record has reached the process that judges; what stays on the report is
            # flat name=value properties (JUnit XML shows them as they are).
            report.user_properties = [p for p in report.user_properties if p[0] != RECORD_KEY]
            value = records[0]
            self.rag.add_record(value)
            if self.prefix is None and report.nodeid.endswith("::" + value["qid"]):
                self.prefix = report.nodeid[: -len(value["qid"]) - 2]
        elif report.failed and report.when == "setup" and "::gate::" not in report.nodeid:
            qid = report.nodeid.rsplit("::", 1)[-1]
            if qid in self.rag.golden and qid not in self.rag.records:
                message = report.longreprtext.strip().splitlines()
                crash = getattr(report.longrepr, "reprcrash", None)  # "OSError: index not built", not "file:line: OSError"
                text = crash.message if crash is not None else (message[-1] if message else "?")
                self.rag.records[qid] = QueryRecord(qid, "error", error=f"setup failed: {text}")
        if report.when == "teardown" and "::gate::" not in report.nodeid:
            qid = records[0]["qid"] if records else report.nodeid.rsplit("::", 1)[-1]
            record = self.rag.records.get(qid)
            if record is not None and (self.prefix is None or report.nodeid == f"{self.prefix}::{qid}"):
                # junitxml takes a test case's properties from its teardown report
                report.user_properties.extend(junit_properties(self.rag, record))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from pytest_ragmetrics._plugin.items import GateItem

        gates = [i for i in items if isinstance(i, GateItem)]
        if gates:
            items[:] = [i for i in items if not isinstance(i, GateItem)] + gates

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from pytest_ragmetrics.errors import BaselineError
        from pytest_ragmetrics.report.text import verdict_text

        rag = self.rag
        if self.retriever_problem is not None:  # nothing was measured: a usage error, as in a serial run
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            rag.summary = "Interrupted: no baseline or report written."
            return
        if not rag.records:
            return
        if rag.options.update_baseline:
            if self.config.pluginmanager.has_plugin("dsession"):
                self._report_gates(session)  # as skipped, like the serial gate items
            try:
                rag.summary = rag.write_baseline()
            except BaselineError as exc:
                rag.summary = str(exc)
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            problems = self._write_reports(session, html=False)
            if problems:
                rag.summary = "\n\n".join([rag.summary or "", *problems]).strip()
            return
        verdict = rag.verdict()
        if self.config.pluginmanager.has_plugin("dsession"):
            self._report_gates(session)
        if not verdict.passed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        problems = self._write_reports(session, html=True)
        rag.summary = verdict_text(verdict, rag.worst_n)
        if rag.mismatch:
            rag.summary += "\n\nCompared despite a different measurement (--rag-accept-mismatch):\n  - " + \
                "\n  - ".join(rag.mismatch)
        if problems:
            rag.summary += "\n\n" + "\n".join(problems)
        leakage = rag.leakage_warning()
        if leakage:
            rag.summary += "\n\n" + leakage

    def _write_reports(self, session: pytest.Session, html: bool) -> list[str]:
        """Write the requested reports; return a line for each that could not be written.

        A run artifact or HTML report that cannot be written fails the session: a
        nightly job that uploads it must not go green without it. The Markdown
        summary (``--rag-markdown``, ``$GITHUB_STEP_SUMMARY``) only presents the
        verdict printed in the log, so failing to write it is a warning and never
        turns a green gate red. Each Markdown file is appended to once, even when
        ``--rag-markdown`` names the step summary.
        """
        from pytest_ragmetrics.errors import RagMetricsError

        rag, problems = self.rag, []
        writes = [(rag.options.report, rag.write_artifact, True)]
        if html:
            writes.append((rag.options.html, rag.write_html, True))
            step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
            seen: set[Path] = set()
            for path in (rag.options.markdown, Path(step_summary) if step_summary else None):
                if path is not None and path.resolve() not in seen:
                    seen.add(path.resolve())
                    writes.append((path, rag.append_markdown, False))
        for path, write, needed in writes:
            if not path:
                continue
            try:
                write(path)
            except RagMetricsError as exc:
                if not needed:
                    problems.append(f"WARNING: {exc}; the verdict above stands")
                    continue
                problems.append(str(exc))
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return problems

    def _report_gates(self, session: pytest.Session) -> None:
        """Under xdist the gates cannot run on a worker: report them from here."""
        from pytest_ragmetrics._plugin.items import gate_report_text

        rag = self.rag
        try:  # the file the items hang from (a folder's queries.jsonl), as the workers named it
            golden_id = self.prefix or str(rag.collect_path.relative_to(self.config.rootpath.resolve()).as_posix())
        except ValueError:
            golden_id = str(rag.collect_path)
        hook = self.config.hook
        updating = rag.options.update_baseline
        gates = rag.verdict().gates
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None and hasattr(terminal, "_show_progress_info"):
            terminal._show_progress_info = False  # its counter only knows the workers' items
        for gate in gates:
            nodeid = f"{golden_id}::gate::{gate.name}"
            location = (golden_id, None, f"rag gate {gate.name}")
            failed = not gate.passed and rag.thresholds.fail_on_regression and not updating
            # No logstart/logfinish: xdist's progress counter only knows the workers' items.
            for when in ("setup", "call", "teardown"):
                outcome = "failed" if failed and when == "call" else "passed"
                longrepr: Any = gate_report_text(rag, gate) if outcome == "failed" else None
                if updating and when == "call":
                    outcome, longrepr = "skipped", (location[0], None, "Skipped: the baseline is being updated")
                report = pytest.TestReport(nodeid, location, {}, outcome, longrepr, when)
                hook.pytest_runtest_logreport(report=report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.rag.summary:
            terminalreporter.write_sep("=", "ragmetrics")
            for line in self.rag.summary.splitlines():
                terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if _rag(config) is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Controller(config), "ragmetrics-controller")


@pytest.fixture(scope="session")
def rag_retriever(request: pytest.FixtureRequest) -> Any:
    """Override this fixture (session scope, in conftest.py) to give the plugin your retriever.

    It returns an object with ``search(query: str, k: int)`` returning ranked
    results, best first (``str`` ids, ``(id, score)`` pairs or objects with an
    ``.id``), and optionally ``search_batch(queries, k)``. With ``--rag-timeout``
    the retriever is called from worker threads, one call at a time, even while
    a call abandoned at its deadline still runs; a class attribute
    ``thread_safe = True`` lets the next call start beside it.
    """
    from pytest_ragmetrics._plugin.retriever import MISSING, PROTOCOL, retriever_problem

    if request.config.getoption("rag_eval"):
        return MISSING  # the first query reports it, once for the whole run
    pytest.fail(f"ragmetrics: {retriever_problem(MISSING)}. {PROTOCOL}", pytrace=False)
