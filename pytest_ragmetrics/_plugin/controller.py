"""The hooks of the process that judges (a serial run, or the xdist controller).

Query items' records arrive here in their reports (from this process or from
xdist workers); at the end of the session this class builds the verdict, reports
the gate items under xdist, writes the baseline or the reports, and assembles the
terminal summary. Workers never register it, so they never write anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import pytest

__all__ = ["Controller"]


def _gates_last(items: list[pytest.Item]) -> None:
    """Move the gate items after every other item, in place, keeping each group's order."""
    from pytest_ragmetrics._plugin.items import GateItem

    gates = [i for i in items if isinstance(i, GateItem)]
    if gates and any(not isinstance(i, GateItem) for i in items[items.index(gates[0]):]):
        items[:] = [*(i for i in items if not isinstance(i, GateItem)), *gates]


class Controller:
    """Hooks that run in the process that judges: a serial run or the xdist controller."""

    def __init__(self, config: pytest.Config) -> None:
        from pytest_ragmetrics._plugin.items import RAG_SESSION

        self.config = config
        self.rag = config.stash[RAG_SESSION]
        self.prefix: str | None = None  # node id of the golden file, learnt from the first query item's report
        self.retriever_problem: str | None = None
        self.not_started: list[str] = []  # query ids the busy retriever could not start (--rag-timeout)
        self.verdict_failed = False  # for pytest's last line, when no gate item ran to fail (-k)
        self.refresh_refused: str | None = None  # why --rag-update-baseline wrote nothing, for pytest's last line
        if self.rag.options.shard is not None and self.rag.options.report is not None:
            self._set_aside(self.rag.options.report)

    def _set_aside(self, report: Path) -> None:
        """Move a shard's previous artifact to ``<name>.stale`` before it runs: a shard stopped before
        it writes its own (killed, timed out) then leaves no file, never an older run's that
        `ragmetrics merge` could take for this run's."""
        if not report.is_file():
            return
        stale = report.with_name(report.name + ".stale")
        try:
            os.replace(report, stale)
        except OSError as exc:
            raise pytest.UsageError(f"ragmetrics: cannot move the previous artifact {report} aside to {stale}: "
                                    f"{exc.strerror or exc}; remove it, so that it cannot pass for this "
                                    "run's") from None
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        note = f"ragmetrics: moved the previous artifact {report} to {stale.name}, so it cannot pass for this run's"
        if reporter is not None:
            reporter.write_line(note)

    @pytest.hookimpl(tryfirst=True)  # before junitxml and other report writers see the record
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_ragmetrics._plugin.items import (
            NOT_STARTED_KEY,
            QUERY_KEY,
            RETRIEVER_PROBLEM_KEY,
            SKIPPED_KEY,
            junit_properties,
        )
        from pytest_ragmetrics._plugin.session import RECORD_KEY
        from pytest_ragmetrics.gate.verdict import QueryRecord

        # a query item's reports say which query and which file they are about: no node id is parsed
        query: Any = next((value for key, value in report.user_properties if key == QUERY_KEY), None)
        if query is not None:
            report.user_properties = [p for p in report.user_properties if p[0] != QUERY_KEY]
            if self.prefix is None:
                self.prefix = query["file"]
        qid = query["qid"] if query is not None else None

        if any(key == NOT_STARTED_KEY for key, _ in report.user_properties):
            report.user_properties = [p for p in report.user_properties if p[0] != NOT_STARTED_KEY]
            if qid is not None and qid not in self.not_started:  # the call's report and the teardown's carry it
                self.not_started.append(qid)

        problems = [str(value) for key, value in report.user_properties if key == RETRIEVER_PROBLEM_KEY]
        if problems:  # an xdist worker stopped at its first query
            self.retriever_problem = problems[0]
            report.user_properties = [p for p in report.user_properties if p[0] != RETRIEVER_PROBLEM_KEY]
            return
        records = [value for key, value in report.user_properties if key == RECORD_KEY]
        if records:
            # The record has reached the process that judges; what stays on the report is
            # flat name=value properties (JUnit XML shows them as they are).
            report.user_properties = [p for p in report.user_properties if p[0] != RECORD_KEY]
            self.rag.judge.add_record(records[0])  # type: ignore[arg-type]  # user_properties hold objects
        elif report.failed and report.when == "setup" and qid is not None:
            if qid in self.rag.golden and qid not in self.rag.records:
                message = report.longreprtext.strip().splitlines()
                # "OSError: index not built", not "file:line: OSError"
                crash = getattr(report.longrepr, "reprcrash", None)
                text = crash.message if crash is not None else (message[-1] if message else "?")
                self.rag.records[qid] = QueryRecord(qid, "error", error=f"setup failed: {text}")
        reasons = [str(value) for key, value in report.user_properties if key == SKIPPED_KEY]
        if reasons:
            report.user_properties = [p for p in report.user_properties if p[0] != SKIPPED_KEY]
            # skipped without a record: not judged (an unscorable query skips with its record, and is judged)
            if report.skipped and qid is not None and qid in self.rag.golden and qid not in self.rag.records:
                self.rag.skipped.setdefault(qid, reasons[0])
        if report.when == "teardown" and qid is not None:
            record = self.rag.records.get(qid)
            if record is not None:
                # junitxml takes a test case's properties from its teardown report
                report.user_properties.extend(junit_properties(self.rag, record))

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> Any:
        """The gate items run after every query item, whatever order other plugins give the items.

        ``--nf``, ``--ff``, ``--lf`` and pytest-randomly reorder the items in hook wrappers or
        first-called hooks; this wrapper is registered after them (at session start), so it
        moves the gates last once they are done. ``pytest_collection_finish`` checks again.
        """
        yield
        _gates_last(items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        _gates_last(session.items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from pytest_ragmetrics._plugin import outputs
        from pytest_ragmetrics._plugin.items import FIXTURE_RAISED
        from pytest_ragmetrics.errors import BaselineError
        from pytest_ragmetrics.report.summary import refresh_summary, session_summary

        rag = self.rag
        if self.retriever_problem is not None:  # nothing was measured: a usage error, as in a serial run
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            if self.retriever_problem.startswith(FIXTURE_RAISED):  # its traceback is on the item; say why it stopped
                rag.summary = self.retriever_problem.removeprefix("ragmetrics: ")
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            rag.summary = "Interrupted: no baseline or report written."
            return
        if self.config.option.collectonly or exitstatus == pytest.ExitCode.USAGE_ERROR:
            return  # nothing was meant to be measured, or a usage error already said why
        before = rag.baseline.meta.get("retriever") if rag.baseline is not None else None
        if rag.options.update_baseline:
            if self.config.pluginmanager.has_plugin("dsession"):
                self._report_gates(session)  # as skipped, like the serial gate items
            try:
                change, written = rag.judge.write_baseline(), True
            except BaselineError as exc:
                change = self.refresh_refused = str(exc)
                written = False
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            problems = self._write_reports(session, html=False)
            rag.summary = refresh_summary(
                change, written=written,
                gold_warning=(rag.gold_check.warning() if rag.gold_check is not None else rag.late_gold_line())
                if written else None,
                aggregate=rag.judge.verdict().aggregate if written else (),
                thresholds_name=rag.thresholds.path or "thresholds",
                retriever_before=before, retriever_now=rag.retriever_description, problems=problems,
                notes=rag.baseline.notes if rag.baseline is not None else (),
                leakage=outputs.leakage_warning(rag))
            return
        if rag.options.shard is not None and not len(rag.golden) \
                and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # more shards than queries: this one was dealt none
        verdict = rag.judge.verdict()
        if self.config.pluginmanager.has_plugin("dsession"):
            self._report_gates(session)
        self.verdict_failed = not verdict.passed
        if not verdict.passed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        problems = self._write_reports(session, html=True)
        rag.summary = session_summary(
            verdict, rag.worst_n, lost=set(rag.gold_check.lost) if rag.gold_check is not None else set(),
            unused_thresholds=rag.unused_thresholds,
            gold_warning=rag.gold_check.warning() if rag.gold_check is not None else rag.late_gold_line(),
            retriever_before=before, retriever_now=rag.retriever_description, not_started=self.not_started,
            unjudged=bool(verdict.to_judge),
            late_gold=rag.late_gold_line() if rag.gold_check is not None else None,
            pooled=rag.judge.pooled_summary() if rag.pooled else None, mismatch=rag.mismatch, problems=problems,
            leakage=outputs.leakage_warning(rag), lowerings=rag.judge.lowerings_summary())

    def _write_reports(self, session: pytest.Session, html: bool) -> list[str]:
        """Write the requested reports; return a line for each that could not be written.

        A run artifact or HTML report that cannot be written fails the session: a
        nightly job that uploads it must not go green without it. The Markdown
        summary (``--rag-markdown``, ``$GITHUB_STEP_SUMMARY``) only presents the
        verdict printed in the log, so failing to write it is a warning and never
        turns a green gate red. Each Markdown file is appended to once, even when
        ``--rag-markdown`` names the step summary.
        """
        from pytest_ragmetrics._plugin import outputs
        from pytest_ragmetrics.errors import RagMetricsError

        rag, problems = self.rag, []
        writes = [(rag.options.report, outputs.write_artifact, True)]
        if html:
            writes.append((rag.options.html, outputs.write_html, True))
            step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
            seen: set[Path] = set()
            for path in (rag.options.markdown, Path(step_summary) if step_summary else None):
                if path is not None and path.resolve() not in seen:
                    seen.add(path.resolve())
                    writes.append((path, outputs.append_markdown, False))
        for path, write, needed in writes:
            if not path:
                continue
            try:
                write(rag, path)
            except RagMetricsError as exc:
                if not needed:
                    problems.append(f"WARNING: {exc}; the verdict above stands")
                    continue
                problems.append(f"ERROR: {exc}; the run fails, as a report it was asked to write is missing")
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return problems

    def _golden_id(self) -> str:
        """The node id of the file the items hang from (a folder's queries.jsonl), as pytest names it."""
        try:
            return self.prefix or str(self.rag.collect_path.relative_to(self.config.rootpath.resolve()).as_posix())
        except ValueError:
            return str(self.rag.collect_path)

    def _report_gates(self, session: pytest.Session) -> None:
        """Under xdist the gates cannot run on a worker: report them from here, as a serial run's
        gate items end (failed, passed, or skipped with the reason: a shard's, a refresh's)."""
        from pytest_ragmetrics._plugin.items import UPDATING, gate_outcome, gate_report_text, skip_longrepr
        from pytest_ragmetrics._plugin.xdist import hide_progress_counter

        rag = self.rag
        golden_id = self._golden_id()
        hook = self.config.hook
        gates = rag.judge.verdict().gates
        hide_progress_counter(self.config)  # its counter only knows the workers' items
        for gate in gates:
            nodeid = f"{golden_id}::gate::{gate.name}"
            location = (golden_id, None, f"rag gate {gate.name}")
            ends = UPDATING if rag.options.update_baseline else gate_outcome(rag, gate)
            # No logstart/logfinish: xdist's progress counter only knows the workers' items.
            for when in ("setup", "call", "teardown"):
                outcome: Literal["passed", "failed", "skipped"] = "passed"
                longrepr: Any = None
                if when == "call" and ends == "failed":
                    outcome, longrepr = "failed", gate_report_text(rag, gate)
                elif when == "call" and ends != "passed":
                    outcome, longrepr = "skipped", skip_longrepr(rag.collect_path, f"rag gate {gate.name}", ends)
                report = pytest.TestReport(nodeid, location, {}, outcome, longrepr, when)
                hook.pytest_runtest_logreport(report=report)

    def _summary_report(self, name: str, message: str) -> pytest.TestReport:
        """A failed report standing for the whole run, for a category of pytest's last line.

        Other plugins (hypothesis' among them) read every entry of the terminal's
        stats as a report, so the entry must be one; no hook sees it, so no
        report file (JUnit XML, the run artifact) counts it as a test.
        """
        golden_id = self._golden_id()
        return pytest.TestReport(f"{golden_id}::{name}", (golden_id, None, name), {}, "failed", message, "call")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        stats = terminalreporter.stats
        if self.verdict_failed and not stats.get("failed"):
            # a -k run deselects the gate items: pytest's last line would read "3 passed" on a red run
            stats.setdefault("retrieval gate failed", []).append(
                self._summary_report("gate", "the retrieval gate failed (see the ragmetrics summary)"))
        if self.refresh_refused is not None:  # the items passed, yet nothing was written and the run fails
            stats.setdefault("baseline refresh refused", []).append(
                self._summary_report("baseline", self.refresh_refused))
        if self.rag.summary:
            from pytest_ragmetrics.report.text import shown_lines

            terminalreporter.write_sep("=", "ragmetrics")
            for line in shown_lines(self.rag.summary).split("\n"):  # no id or text of the user's starts a line
                terminalreporter.write_line(line)
