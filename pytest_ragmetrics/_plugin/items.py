"""The test items ``--rag-eval`` adds: one per golden query, one per gate."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Sequence

import pytest

from pytest_ragmetrics._plugin.deadline import RetrieverBusy
from pytest_ragmetrics._plugin.retriever import PROTOCOL, retriever_problem
from pytest_ragmetrics._plugin.session import RECORD_KEY, RagSession
from pytest_ragmetrics._plugin.xdist import xdist_queue
from pytest_ragmetrics.errors import RagMetricsError, listed, shown, shown_lines
from pytest_ragmetrics.gate.verdict import Drop, Gate, QueryRecord
from pytest_ragmetrics.golden import Query
from pytest_ragmetrics.report.text import gate_line, leak_lines, leak_summary, regression_entry_lines
from pytest_ragmetrics.scope import ScopeUnchecked, scope_text
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL

__all__ = ["FIXTURE_RAISED", "NOT_STARTED_KEY", "QUERY_KEY", "SKIPPED_KEY", "GoldenFile", "QueryItem", "GateItem",
           "RAG_SESSION", "RETRIEVER_PROBLEM_KEY", "UPDATING", "gate_outcome", "gate_report_text", "junit_properties",
           "name_skip", "skip_longrepr"]

RAG_SESSION = pytest.StashKey[RagSession]()
_RETRIEVER_CHECKED = pytest.StashKey[bool]()
_SEARCHED = pytest.StashKey[bool]()

#: How the message about a ``rag_retriever`` fixture that raised starts (the controller prints it once more).
FIXTURE_RAISED = "ragmetrics: the rag_retriever fixture raised"

#: The user_properties key under which an xdist worker tells the controller its retriever cannot be searched.
RETRIEVER_PROBLEM_KEY = "ragmetrics-retriever-problem"

#: The user_properties key of a query that could not start (the retriever was busy with an abandoned call).
NOT_STARTED_KEY = "ragmetrics-not-started"

#: Why the gate items of a ``--rag-update-baseline`` run are skipped.
UPDATING = "the baseline is being updated; nothing to compare"

#: The user_properties key of a skipped query's report: the skip's reason (the query is not judged).
SKIPPED_KEY = "ragmetrics-skipped"

#: The user_properties key that tells the process that judges which query (``qid``) of which golden
#: file (``file``, its node id) a report is about; it removes the key before any report writer sees it.
QUERY_KEY = "ragmetrics-query"


class QueryRegression(Exception):
    """A query's metrics fell beyond its per-query tolerance."""


class GateFailure(Exception):
    """An aggregate gate failed."""


class QueryLeak(QueryRegression):
    """A query returned documents outside its scope: it fails whatever the thresholds say."""


def _machinery() -> tuple[str, ...]:
    import _pytest
    import pluggy

    return tuple(str(Path(module.__file__).parent) + os.sep for module in (_pytest, pluggy))  # type: ignore[arg-type]


#: Folders whose frames a query item's traceback leaves out: pytest's, pluggy's and this plugin's.
_MACHINERY = (*_machinery(), str(Path(__file__).parent) + os.sep)


def _uncaptured_stderr(capture: Any) -> int | None:
    """The terminal's stderr as pytest's fd capture saved it, for writes that cannot suspend capture
    first (faulthandler's); None without fd capture (``-s``, ``--capture=sys``), where stderr is it."""
    err = getattr(getattr(capture, "_global_capturing", None), "err", None)
    fd = getattr(err, "targetfd_save", None)
    return fd if isinstance(fd, int) else None


def fixture_failure(item: pytest.Item, exc: BaseException) -> str:
    """One line for a ``rag_retriever`` fixture that raised: what, and where the fixture is."""
    where = ""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).get("rag_retriever")
    code = getattr(getattr(defs[-1], "func", None), "__code__", None) if defs else None
    if code is not None:
        try:
            path = Path(code.co_filename).resolve().relative_to(item.config.rootpath.resolve())
        except ValueError:
            path = Path(code.co_filename)
        where = f" (the fixture at {path}:{code.co_firstlineno})"
    return (f"{FIXTURE_RAISED} {type(exc).__name__}: {exc}{where}. Nothing was "
            "measured and no baseline or report was written; the traceback is above.")


def _rag_query(rag_retriever: Any) -> None:
    """Stands in as the item's function so pytest resolves the ``rag_retriever`` fixture."""


class GoldenFile(pytest.File):
    """The golden set as a collector; its children are the query and gate items."""

    def collect(self) -> Any:
        rag = self.config.stash[RAG_SESSION]
        for query in rag.golden:
            # pytest prints node ids as they are: a query id with a line break or a bidi override must not
            # forge a line of the terminal's summary, so the item is named with the id as shown
            yield QueryItem.from_parent(self, name=shown(query.qid), callobj=_rag_query, query=query)
        if not rag.is_worker:  # under xdist the controller reports the gates itself
            for name in rag.gates:
                yield GateItem.from_parent(self, name=f"gate::{name}", gate=name)


class QueryItem(pytest.Function):
    """Retrieve one golden query, score it and compare it with its baseline entry."""

    def __init__(self, *, query: Query, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query = query
        file = self.parent.nodeid if self.parent is not None else self.nodeid.rpartition("::")[0]
        self.user_properties.append((QUERY_KEY, {"qid": query.qid, "file": file}))

    def setup(self) -> None:
        """Resolve ``rag_retriever``; at the first query, check it can be searched at all.

        The fixture's build (the reference stack's, or any code reporting through
        :mod:`pytest_ragmetrics.progress`) is shown on the terminal as it goes.
        A fixture that returns the wrong thing would fail every query the same
        way; instead the run stops here with one usage error (under xdist, each
        worker stops at its first query). A fixture that raises is the same kind of
        problem: its traceback shows once, on this item, and nothing else runs, so
        a configuration error never reads as a retrieval regression.
        """
        if self.config.stash.get(_RETRIEVER_CHECKED, False):
            super().setup()
            return
        from pytest_ragmetrics._plugin.progress import fixture_progress
        from pytest_ragmetrics._plugin.setup_deadline import setup_deadline

        try:
            capture = self.config.pluginmanager.getplugin("capturemanager")
            release = (lambda: capture.suspend_global_capture(in_=True)) if capture is not None else (lambda: None)
            with setup_deadline(self.config.stash[RAG_SESSION].options.setup_timeout, release_output=release,
                                stderr_fd=_uncaptured_stderr(capture)), \
                    fixture_progress(self.config, self.nodeid):  # a build shows on the terminal, not in captured output
                super().setup()
        except Exception as exc:
            self.session.shouldstop = "ragmetrics: the rag_retriever fixture raised"
            self.user_properties.append((RETRIEVER_PROBLEM_KEY, fixture_failure(self, exc)))
            raise
        problem = retriever_problem(self.funcargs["rag_retriever"], self.config.stash[RAG_SESSION].golden.filtered())
        if problem is None:
            self.config.stash[_RETRIEVER_CHECKED] = True
            return
        self._stop_run(f"ragmetrics: {problem}. {PROTOCOL}")

    def _stop_run(self, message: str) -> None:
        """A usage error found at a query: the run stops with pytest's usage-error exit code."""
        if not hasattr(self.config, "workerinput"):
            pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)
        # pytest.exit would crash an xdist worker: fail this item, stop the worker, and
        # let the controller end the run with the usage-error exit code.
        self.session.shouldstop = "ragmetrics: the retriever cannot be searched"
        self.user_properties.append((RETRIEVER_PROBLEM_KEY, message))
        pytest.fail(message, pytrace=False)

    def _traceback_filter(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        """pytest's, pluggy's and this plugin's frames are left out (``--fulltrace`` keeps them): a fixture
        that raises then shows its own frames, not a page of the machinery that called it."""
        traceback = super()._traceback_filter(excinfo)
        if self.config.getoption("fulltrace", False):
            return traceback
        own = traceback.filter(lambda entry: not str(entry.path).startswith(_MACHINERY))
        return own or traceback

    def runtest(self) -> None:
        __tracebackhide__ = True  # a failing retriever's own frames are what its user needs to see
        rag = self.config.stash[RAG_SESSION]
        retriever = self.funcargs["rag_retriever"]
        try:
            with self._first_search():
                record = rag.worker.run_query(retriever, self.query, self._upcoming)
        except RetrieverBusy as exc:  # not run: no record, so not scored as a regression; the summary says why
            self.user_properties.append((NOT_STARTED_KEY, str(exc)))
            raise
        except ScopeUnchecked as exc:  # bad input, not a retrieval result: stop as for a retriever problem
            self._stop_run(f"ragmetrics: {exc}")
        except Exception as exc:
            record = getattr(exc, "ragmetrics_record", None) or QueryRecord(
                self.query.qid, "error", error=f"{type(exc).__name__}: {exc}")
            self._attach(rag, record)
            raise
        self._attach(rag, record)
        drops = record.drops or []
        exceeded = [d for d in drops if d.exceeded]
        if record.leaks:  # zero tolerance: no threshold, not even report-only mode, lets a leak pass; nor a skip
            raise QueryLeak(self._leak_text(rag, record, drops if exceeded else []))
        if record.status == "unscorable":
            pytest.skip(f"{record.error}: not scored" if record.error else
                        f"no document is judged relevant at level {rag.config.relevance_level}: not scored")
        if exceeded and rag.thresholds.fail_on_regression:
            if rag.pooled and record.inconclusive:
                raise QueryRegression(self._inconclusive_text(rag, record, exceeded))
            raise QueryRegression(self._regression_text(rag, record, drops))

    def _undecided(self, rag: RagSession, record: QueryRecord) -> Any:
        from pytest_ragmetrics.gate.verdict import undecided

        entry = rag.baseline_id.get(record.qid, record.qid)
        return None if rag.baseline is None else undecided(record, rag.baseline.metrics_of(entry), rag.thresholds)

    def _inconclusive_text(self, rag: RagSession, record: QueryRecord, exceeded: list[Drop]) -> str:
        """An inconclusive query's failure: what fell, how far the unjudged documents could lift it, which."""
        basis = self._undecided(rag, record)
        docs, upper, base = basis.docs, basis.upper, basis.baseline_upper
        head = "; ".join(f"{d.metric} fell {d.before:.4f} -> {d.after:.4f} (allowed drop {d.tolerance:g}), but "
                         f"{base.get(d.metric, d.before):.4f} -> {upper.get(d.metric, d.after):.4f} if the unjudged "
                         "documents are relevant" for d in exceeded)
        new = record.unjudged_new is not None and set(docs) <= set(record.unjudged_new)
        what = 'this 1 document' if len(docs) == 1 else f'these {len(docs)} documents'
        return (f"inconclusive: {head}\n  judge {what} "
                f"for {shown(record.qid)}: {', '.join(map(shown, docs))} (unjudged in its top {rag.options.k}"
                f"{', not in the baseline top' if new else ''}); see gate unjudged")

    def _leak_text(self, rag: RagSession, record: QueryRecord, drops: list[Drop]) -> str:
        """A leaking query's failure: which documents, with their metadata, fell outside which scope."""
        lines = [leak_summary(record.leaks, self.query.scope or {})]
        q = self.query
        lines += leak_lines(q.qid, q.text, q.filters, q.scope or {}, record.leaks)
        if drops:
            lines += ["", self._regression_text(rag, record, drops)]
        return "\n".join(lines)

    def _first_search(self) -> Any:
        """The first search of this process shows a build on the terminal too, as the fixture's
        setup does: a fixture may return a retriever that builds its index on first use."""
        if self.config.stash.get(_SEARCHED, False):
            return contextlib.nullcontext()
        self.config.stash[_SEARCHED] = True
        from pytest_ragmetrics._plugin.progress import fixture_progress

        return fixture_progress(self.config, self.nodeid)

    def _attach(self, rag: RagSession, record: QueryRecord) -> None:
        self.user_properties.append((RECORD_KEY, rag.worker.record_payload(record)))
        if record.metrics:
            for metric, value in record.metrics.items():
                self.user_properties.append((metric, round(value, 6)))

    def _upcoming(self) -> Sequence[Query]:
        """This query and the ones this process will run next, for one search_batch call.

        Under xdist that is the worker's own queue (other workers' queries are not
        fetched); in a serial run, the items that follow in run order.
        """
        rag = self.config.stash[RAG_SESSION]
        items = self.session.items
        size = rag.options.batch_size
        queue = xdist_queue(self.config)
        if queue is not None:
            following = [items[i] for i in queue]
        else:
            if rag.item_index is None:
                rag.item_index = {it.nodeid: n for n, it in enumerate(items)}
            order = rag.item_index
            start = order.get(self.nodeid, len(items))
            following = items[start + 1:start + size]
        ahead = [i.query for i in following if isinstance(i, QueryItem)]
        return [self.query, *ahead[: size - 1]]

    def _regression_text(self, rag: RagSession, record: QueryRecord, drops: list[Drop]) -> str:
        """First line for pytest's short summary (what fell), then the worst-N style entry."""
        from pytest_ragmetrics.gate.verdict import Regression

        exceeded = [d for d in drops if d.exceeded]
        head = "; ".join(f"{d.metric} rose {d.before:.4f} -> {d.after:.4f}: a result at or above the answer threshold "
                         "came back for a question marked answerable: false" if d.rise else
                         f"{d.metric} fell {d.before:.4f} -> {d.after:.4f} (allowed drop {d.tolerance:g})"
                         for d in exceeded)
        gold = self.query.gold(rag.config.relevance_level)
        explains = record.explains
        if not self.query.answerable:
            explains = [f"score {s:.4g}" if s is not None else None for s in record.scores] or explains
        regression = Regression(self.query.qid, self.query.text, drops, gold, record.ranking, explains,
                                answerable=self.query.answerable, filters=self.query.filters)
        return "\n".join([head, *regression_entry_lines(regression)])  # one query: no list number

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, (QueryRegression, RagMetricsError)):
            return shown_lines(str(excinfo.value))
        rep = super().repr_failure(excinfo)  # pytest.Function.repr_failure takes no style
        crash = getattr(rep, "reprcrash", None)
        if crash is not None and isinstance(getattr(crash, "message", None), str):
            # pytest's short summary prints this message whole on CI: a line break in the retriever's
            # own error would start a line of its own there (a fake "All gates passed")
            crash.message = shown(crash.message)
        return rep

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # a line, not None: pytest places a skip raised by a marker or a fixture at the item's line
        return self.path, 0, f"rag query {shown(self.query.qid)}"


def name_skip(item: QueryItem | GateItem, report: pytest.TestReport) -> None:
    """A skipped query's or gate's report names it; a query's carries the skip's reason to the process
    that judges.

    pytest places a skip at the line that raised it (``runner.py:184`` for a skip in the
    ``rag_retriever`` fixture), which says nothing about which query was not judged; here its
    location is the golden file and its reason starts with the item's name.
    """
    longrepr = report.longrepr
    if not isinstance(longrepr, tuple) or len(longrepr) != 3:
        return
    reason = str(longrepr[2]).removeprefix("Skipped: ")
    if isinstance(item, GateItem):
        report.longrepr = skip_longrepr(item.path, f"rag gate {item.gate}", reason)
        return
    report.longrepr = skip_longrepr(item.path, f"rag query {shown(item.query.qid)}", reason)
    report.user_properties = [*report.user_properties, (SKIPPED_KEY, reason)]  # the item's own list stays as it is


def skip_longrepr(path: Path, what: str, reason: str) -> Any:
    """A skip's location and reason as pytest's reports hold them: the golden file, no line (the terminal
    then prints ``golden.yaml: rag query q-001: why``), and what was skipped."""
    return str(path), None, f"{what}: {reason}"


def junit_properties(rag: RagSession, record: QueryRecord) -> list[tuple[str, object]]:
    """Flat properties for a query's JUnit XML test case: its baseline values and its verdict
    (``regressed``, ``inconclusive``, ``ok``, ``new``, ``error`` or ``unscorable``), for a pooled golden
    set ``judged@k`` and ``unjudged_new@k``, and ``stale_label`` (``stale`` or
    ``undated``) when its labels are past their age limit; its metrics are already there."""
    ages = rag.labels
    state = None if ages is None else ("stale" if any(r.qid == record.qid for r in ages.stale) else
                                       "undated" if any(r.qid == record.qid for r in ages.undated) else None)
    properties = _verdict_properties(rag, record) + ([("stale_label", state)] if state else [])
    if record.leaks:  # a leak fails the query whatever its metrics did: it is the verdict
        properties = [(k, v) for k, v in properties if k != "verdict"]
        properties += [("leak", ", ".join(f"{d['doc']} {scope_text(d['metadata'])}" for d in record.leaks)),
                       ("verdict", "leak")]
    return properties


def _verdict_properties(rag: RagSession, record: QueryRecord) -> list[tuple[str, object]]:
    baseline = None if rag.baseline is None or rag.options.update_baseline else rag.baseline
    if record.status == "unanswerable":  # its score is false_retrieval; verdict ok/regressed/new as any query's
        entry = rag.baseline_id.get(record.qid, record.qid)
        found = [("false_retrieval", record.false_retrieval)]
        if baseline is None or FALSE_RETRIEVAL not in baseline.per_query.get(entry, {}):
            return [*found, ("verdict", "new")]
        before = baseline.per_query[entry][FALSE_RETRIEVAL]
        regressed = bool(record.drops)  # compared where it was scored
        return [*found, ("baseline.false_retrieval", before), ("verdict", "regressed" if regressed else "ok")]
    if record.status != "scored":
        return [("verdict", record.status)]
    k = rag.options.k
    pooled: list[tuple[str, object]] = [] if record.judged is None else [(f"judged@{k}", round(record.judged, 6))]
    if record.unjudged_new is not None:
        pooled.append((f"unjudged_new@{k}", len(record.unjudged_new)))
    if baseline is None or record.qid not in baseline.per_query:
        return [*pooled, ("verdict", "new")]
    before = baseline.metrics_of(record.qid)
    exceeded = any(d.exceeded for d in record.drops or [])  # compared where it was scored
    if exceeded and rag.pooled:
        verdict = "inconclusive" if record.inconclusive else "regressed"
    else:
        verdict = "regressed" if exceeded else "ok"
    return [*((f"baseline.{m}", round(v, 6)) for m, v in before.items()), *pooled, ("verdict", verdict)]


def gate_report_text(rag: RagSession, gate: Gate) -> str:
    """A failed gate's one line: why, and the queries behind it (the full verdict is the summary's)."""
    return gate_line(rag.judge.verdict(), gate)


def gate_outcome(rag: RagSession, gate: Gate) -> str:
    """How a gate's item ends: ``"failed"``, ``"passed"``, or the reason it is skipped.

    A shard's gates are judged by ``ragmetrics merge`` over every shard: their items are
    skipped, never passed, as a shard cannot judge them from its part of the set (a gate
    failed in the shard itself, as the baseline gate on a skipped query, still fails).
    """
    if not gate.passed and (rag.thresholds.fail_on_regression or gate.strict):
        return "failed"
    if rag.options.shard is not None and gate.name in rag.judge.verdict().deferred and gate.passed:
        from pytest_ragmetrics.gate.shard import JUDGED_BY_MERGE

        return JUDGED_BY_MERGE
    if not gate.passed:  # report-only mode: failed, and said so; never reported as a pass
        return f"failed, reported only (fail_on_regression is false): {gate.message}"
    return "passed"


class GateItem(pytest.Item):
    """One aggregate check, run after every query item (serial runs only)."""

    def __init__(self, *, gate: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    def runtest(self) -> None:
        rag = self.config.stash[RAG_SESSION]
        if rag.options.update_baseline:
            pytest.skip(UPDATING)
        pending = self._queries_not_run_yet()
        if pending:  # judging now would judge a part of the run, and the verdict is built once
            raise GateFailure(
                f"gate {self.gate}: not judged here: this item ran before "
                f"{'1 query item' if len(pending) == 1 else f'{len(pending)} query items'} ({listed(pending)}), "
                "as a plugin reordered the items after collection; the run fails, and its verdict over every "
                "query is in the ragmetrics summary")
        gate = next(g for g in rag.judge.verdict().gates if g.name == self.gate)
        outcome = gate_outcome(rag, gate)
        if outcome == "failed":
            raise GateFailure(gate_report_text(rag, gate))
        if outcome != "passed":
            pytest.skip(outcome)

    def _queries_not_run_yet(self) -> list[str]:
        """The query items that come after this gate item in run order (in a serial run, not run yet)."""
        items = self.session.items
        try:
            here = next(n for n, item in enumerate(items) if item is self)
        except StopIteration:
            return []
        return [shown(item.query.qid) for item in items[here + 1:] if isinstance(item, QueryItem)]

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, GateFailure):
            return shown_lines(str(excinfo.value))
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # a line, not None: pytest places a skip raised by a marker at the item's line
        return self.path, 0, f"rag gate {self.gate}"
