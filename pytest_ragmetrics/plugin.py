"""pytest hooks and options for ``--rag-eval``; all logic lives in the private modules.

Without ``--rag-eval`` every hook returns at once and nothing heavy is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator, cast

import pytest

from pytest_ragmetrics._plugin.options import OPTIONS, PATH_OPTIONS

if TYPE_CHECKING:
    from pytest_ragmetrics.protocol import Retriever


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragmetrics", "retrieval regression gating (pytest-ragmetrics)")
    for spec in OPTIONS:  # declared once, in _plugin/options.py; docs/configuration.md is tested against it
        if spec.flag:
            group.addoption(spec.flag, **spec.flag_kwargs())
        if spec.ini:
            parser.addini(spec.ini, spec.ini_help, default=spec.ini_default)


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
    from pytest_ragmetrics._plugin.items import RAG_SESSION
    from pytest_ragmetrics._plugin.options import build_options, check_outputs
    from pytest_ragmetrics._plugin.session import RagSession
    from pytest_ragmetrics.errors import RagMetricsError

    ini_base = config.inipath.parent if config.inipath else config.rootpath
    cwd = config.invocation_params.dir

    def get(flag: str, ini: str) -> Any:
        if flag:
            return config.getoption(flag)
        return _getini(config, ini)

    def resolve(value: str, from_cli: bool) -> Path:
        return (cwd if from_cli else ini_base) / value

    def origin(ini: str) -> str:
        """How an ini key was given, for a message: ``-o rag_golden=`` or ``rag_golden in pytest.ini``."""
        overrides = getattr(config.option, "override_ini", None) or []
        if any(str(o).partition("=")[0].strip() == ini for o in overrides):  # -o, also from PYTEST_ADDOPTS
            return f"-o {ini}="
        return f"{ini} in {config.inipath.name if config.inipath else 'the ini file'}"

    _refuse_misread_rootdir(config)
    try:
        from pytest_ragmetrics.progress import settings as progress_settings

        progress_settings()  # RAGMETRICS_PROGRESS*: a bad value stops the run now, not at the first query
        options = build_options(get, resolve, origin)
        junit = getattr(config.option, "xmlpath", None)
        check_outputs(options, config.inipath, os.environ.get("GITHUB_STEP_SUMMARY"),  # before anything is read
                      str(cwd / junit) if junit else None)
        rag = config.stash[RAG_SESSION] = RagSession(options, hasattr(config, "workerinput"), config.rootpath)
    except RagMetricsError as exc:
        raise pytest.UsageError(f"ragmetrics: {exc}") from None
    # The golden set is collected like any test file: without explicit paths it is
    # the only thing collected (not the project's test suite), with them it joins them.
    golden = str(rag.options.golden)
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [golden]
    elif not any((cwd / arg.split("::")[0]).resolve() == rag.options.golden.resolve() for arg in config.args):
        config.args.append(golden)  # pytest before 8 keeps args as typed: compare the files, not the spelling


_PYTEST_BEFORE_8 = int(pytest.__version__.split(".")[0]) < 8

#: ini keys declared with default None, whose "unset" differs from a value set empty
_UNSET_IS_NONE = frozenset(spec.ini for spec in OPTIONS if spec.ini and spec.ini_default is None)


def _getini(config: pytest.Config, name: str) -> Any:
    """``config.getini(name)``, with None for an unset key declared with default None.

    pytest before 8.0 returns "" for it, which reads as a key set empty (refused as an
    empty path) rather than as a key left out.
    """
    value = config.getini(name)
    if value == "" and name in _UNSET_IS_NONE and _PYTEST_BEFORE_8:
        override = config._get_override_ini_value(name)  # type: ignore[attr-defined]  # pytest < 8 has it
        if name not in config.inicfg and override is None:  # neither the ini file nor -o sets it
            return None
    return value


_PATH_FLAGS = tuple(f"--{dest.replace('_', '-')}" for dest, _, _ in PATH_OPTIONS)


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
    unread = rag.unused_thresholds
    if rag.thresholds.path:
        thresholds = rag.thresholds.path
    elif rag.options.thresholds:
        thresholds = f"defaults (no {rag.options.thresholds}" + (
            f"; {unread} exists but is not read: it is not beside the baseline in use" if unread else "") + ")"
    elif unread is not None:
        thresholds = f"defaults (rag_thresholds = defaults: {unread} is not read)"
    else:
        thresholds = "defaults (rag_thresholds = defaults)"
    from pytest_ragmetrics.evaluation import id_rule

    subset = f"smoke: {rag.options.smoke_rule}" if rag.options.subset == "smoke" else rag.options.subset

    ids = id_rule(rag.config.id_separator)
    shard = rag.options.shard
    return [
        f"ragmetrics: {len(rag.golden)} of {len(rag.full_golden)} queries ({subset}) "
        f"from {rag.options.golden}",
        *([f"ragmetrics: shard {shard[0]}/{shard[1]}"
           + (f" (attempt {rag.options.attempt})" if rag.options.attempt is not None else "")
           + f": {len(rag.golden)} of the {len(rag.sharded_set)} queries; "
           "a query that falls beyond its tolerance or errors fails this shard, and the gates (the aggregate "
           "included) are judged over every shard by `ragmetrics merge`"
           + ("" if rag.options.report else " (pass --rag-report=PATH: merge reads the shard's artifact)")]
          if shard is not None else []),
        f"ragmetrics: metrics {' '.join(rag.metrics)}, k={rag.options.k}, relevance level "
        f"{rag.config.relevance_level}, gain {rag.config.gain}; baseline {base}"
        + (f"; timeout {rag.options.timeout:g} s per query" if rag.options.timeout else "")
        + (f"; setup timeout {rag.options.setup_timeout:g} s" if rag.options.setup_timeout else ""),
        f"ragmetrics: thresholds {thresholds}; {ids}",
        f"ragmetrics: {rag.gold_header()}",
        *([f"ragmetrics: {line}"] if (line := rag.scope_header()) else []),
        *([f"ragmetrics: {rag.labels.header()}"] if rag.labels is not None else []),
        *([f"ragmetrics: {rag.ratchet.header(rag._shown_path(rag.options.baseline))}"]
          if rag.ratchet is not None else []),
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A skipped query's or gate's report names it, and a query's carries the skip's reason (``name_skip``)."""
    outcome = yield
    if _rag(item.config) is None:
        return
    report = outcome.get_result()
    if report.skipped:
        from pytest_ragmetrics._plugin.items import GateItem, QueryItem, name_skip

        if isinstance(item, (QueryItem, GateItem)):
            name_skip(item, report)


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
