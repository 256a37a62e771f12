"""State of one ``pytest --rag-eval`` session, kept out of the hooks.

Every process (serial run, xdist controller, xdist worker) builds one
:class:`RagSession` at configure time from the options and files. Workers only
retrieve and score; records travel to the controller inside the reports'
``user_properties`` (the same path in a serial run), and only the controller,
or the single process of a serial run, aggregates, gates and writes files.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pytest_ragmetrics.files import atomic_write_json, atomic_write_text, git_commit, write_problem
from pytest_ragmetrics.gate.baseline import Baseline, fingerprint_mismatch, load_baseline, write_baseline
from pytest_ragmetrics.gate.thresholds import Thresholds, load_thresholds
from pytest_ragmetrics._plugin.deadline import RetrievalTimeout, RetrieverCaller
from pytest_ragmetrics.errors import BaselineError, RagMetricsError, RagMetricsWarning, RetrieverError, brief_repr
from pytest_ragmetrics.evaluation import mean_metrics, score_query
from pytest_ragmetrics.gate.verdict import QueryRecord, Verdict, build_verdict, gate_names, query_drops, Drop
from pytest_ragmetrics.golden import GoldenSet, Query, load_golden
from pytest_ragmetrics.measures import MeasurementConfig, parse_measures
from pytest_ragmetrics.metrics import document_of, ideal_grades
from pytest_ragmetrics.parents import score_parents
from pytest_ragmetrics.results import normalize_results
from pytest_ragmetrics._plugin.retriever import declares_thread_safe
from pytest_ragmetrics.gate.subset import select_smoke
from pytest_ragmetrics.report.tables import counted

__all__ = ["RagOptions", "RagSession", "RECORD_KEY"]

#: The user_properties key a query item's record travels under.
RECORD_KEY = "ragmetrics"

_DEFAULT_K = 10

#: Read when neither --rag-thresholds nor ini rag_thresholds names a file; may be absent.
DEFAULT_THRESHOLDS = "baselines/thresholds.json"


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
    thresholds_given: bool = False  # named by the user, so it must exist


def _metrics_for(k: int) -> list[str]:
    return [f"recall@{k}", f"hit_rate@{k}", f"mrr@{k}", f"ndcg@{k}"]


def build_options(get: Callable[[str, str], Any], resolve: Callable[[str, bool], Path]) -> RagOptions:
    """Resolve options from ``get(option, ini)`` (flag wins over ini) into RagOptions.

    ``resolve(value, from_cli)`` turns a path into an absolute one.
    """

    def pick(flag: str, ini: str) -> tuple[Any, bool]:
        if flag:
            value = get(flag, "")
            if value not in (None, ""):
                return value, True
        return get("", ini), False

    raw_k, _ = pick("rag_k", "rag_k")
    raw_metrics, _ = pick("rag_metrics", "rag_metrics")
    k_given = raw_k not in (None, "")
    try:
        k = int(raw_k) if k_given else None
    except (TypeError, ValueError):
        raise RagMetricsError(f"rag_k must be a positive integer, got {raw_k!r}") from None
    if k is not None and k < 1:
        raise RagMetricsError(f"rag_k must be a positive integer, got {k}")
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
    golden, g_cli = pick("rag_golden", "rag_golden")
    baseline, b_cli = pick("rag_baseline", "rag_baseline")
    thresholds, t_cli = pick("rag_thresholds", "rag_thresholds")
    thresholds_given = thresholds is not None  # the ini default is None: only the user sets it
    if thresholds is None:
        thresholds = DEFAULT_THRESHOLDS
    subset, _ = pick("rag_subset", "rag_subset")
    smoke, _ = pick("", "rag_smoke")
    report = get("rag_report", "")
    html = get("rag_html", "")
    markdown = get("rag_markdown", "")
    corpus, c_cli = pick("rag_corpus", "rag_corpus")
    repeat = int(get("rag_repeat", "") or 1)
    if repeat < 1:
        raise RagMetricsError(f"--rag-repeat must be >= 1, got {repeat}")
    worst = get("rag_worst", "")
    raw_timeout, _ = pick("rag_timeout", "rag_timeout")
    timeout = _parse_timeout(raw_timeout)
    return RagOptions(
        golden=resolve(golden, g_cli),
        baseline=resolve(baseline, b_cli),
        thresholds=resolve(thresholds, t_cli) if thresholds else None,
        measurement=measurement,
        k=k,
        subset=subset or "full",
        smoke_rule=smoke or "tag:smoke",
        update_baseline=bool(get("rag_update_baseline", "")),
        accept_mismatch=bool(get("rag_accept_mismatch", "")),
        report=resolve(report, True) if report else None,
        html=resolve(html, True) if html else None,
        markdown=resolve(markdown, True) if markdown else None,
        corpus=resolve(corpus, c_cli) if corpus else None,
        worst=int(worst) if worst not in (None, "") else None,
        repeat=repeat,
        batch_size=int(get("rag_batch_size", "") or 32),
        timeout=timeout,
        thresholds_given=thresholds_given and bool(thresholds),
    )


def _parse_timeout(raw: Any) -> float | None:
    """``--rag-timeout``/``rag_timeout``: seconds > 0; empty or ``none`` mean no limit.

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
        raise RagMetricsError(f"rag_timeout must be a number of seconds > 0 (or 'none'), got {raw!r}{hint}")
    return value


class RagSession:
    """Golden set, baseline, thresholds and the records of one run."""

    def __init__(self, options: RagOptions, is_worker: bool, rootdir: Path) -> None:
        self.options = options
        self.is_worker = is_worker
        self.rootdir = rootdir
        self.config = options.measurement
        self.metrics = self.config.metric_names
        self.full_golden: GoldenSet = load_golden(options.golden, id_separator=self.config.id_separator)
        if options.subset == "smoke":
            if options.update_baseline:
                raise RagMetricsError("--rag-update-baseline needs the full set; drop --rag-subset smoke")
            self.golden = select_smoke(self.full_golden, options.smoke_rule)
        elif options.subset == "full":
            self.golden = self.full_golden
        else:
            raise RagMetricsError(f"--rag-subset must be smoke or full, got {options.subset!r}")
        self.thresholds: Thresholds = load_thresholds(options.thresholds, self.config,
                                                      required=options.thresholds_given)
        self.worst_n = options.worst if options.worst is not None else self.thresholds.worst_n
        self.baseline: Baseline | None = None
        #: why an existing baseline could not be read when --rag-update-baseline replaces it
        self.unreadable_baseline: str | None = None
        self.mismatch: list[str] = []
        if options.update_baseline:
            try:
                self.baseline = load_baseline(options.baseline)
            except BaselineError as exc:
                self.baseline = None  # a broken or missing one is about to be replaced
                if options.baseline.exists():
                    self.unreadable_baseline = str(exc)
        elif options.baseline.exists():
            self.baseline = load_baseline(options.baseline)
            self._check_baseline(self.baseline)
        self.gates = gate_names(self.metrics, self.thresholds)
        golden_path = options.golden.resolve()
        #: The file the golden set's items hang from (a folder's queries.jsonl).
        self.collect_path = golden_path / "queries.jsonl" if golden_path.is_dir() else golden_path
        self.records: dict[str, QueryRecord] = {}
        self.retriever_description: Any = None
        self._described = False
        self._prefetched: dict[str, Any] = {}
        self._batch_off = False  # set when search_batch overran --rag-timeout or answered out of shape
        self._batch_warned = False
        self._unbatched: set[str] = set()  # queries of a batch that raised: searched one at a time
        self._calls: RetrieverCaller | None = None
        self._ideal = {q.qid: ideal_grades(q.judgments) for q in self.golden}
        self._verdict: Verdict | None = None
        self.summary: str | None = None
        self.baseline_written: str | None = None
        #: one time for every file this run writes, so the artifact and the HTML agree
        self.created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()

    # ------------------------------------------------------------- baseline checks

    def _check_baseline(self, baseline: Baseline) -> None:
        problems = fingerprint_mismatch(baseline.meta, self.config, self.options.k)
        changed = [
            q.qid for q in self.full_golden
            if q.qid in baseline.per_query
            and baseline.per_query[q.qid].get("_judgments") not in (None, q.judgments_digest())
        ]
        if changed:
            problems.append(f"judgments or text changed for {counted(len(changed), 'query', 'queries')} "
                            "since the baseline: "
                            f"{', '.join(changed[:10])}{' …' if len(changed) > 10 else ''}")
        if baseline.per_query and not any(q.qid in baseline.per_query for q in self.full_golden):
            golden = baseline.meta.get("golden")
            source = golden.get("source") if isinstance(golden, dict) else None
            problems.append(f"golden set: none of the baseline's {len(baseline.per_query)} queries is in "
                            f"{self.options.golden}" + (f" (it was measured on {brief_repr(source)})" if source else "")
                            + "; it describes another golden set")
        if problems and not self.options.accept_mismatch:
            raise BaselineError(
                f"{baseline.path} was measured differently, so comparing would mislead:\n  - "
                + "\n  - ".join(problems)
                + "\nRe-measure with `pytest --rag-eval --rag-update-baseline` (and commit the diff), "
                "or pass --rag-accept-mismatch to compare anyway."
            )
        self.mismatch = problems

    # ------------------------------------------------------------------ retrieval

    def _caller(self, retriever: Any) -> RetrieverCaller:
        """The one caller of this process's retriever, made at its first query."""
        if self._calls is None:
            self._calls = RetrieverCaller(self.options.timeout, declares_thread_safe(retriever))
        return self._calls

    def _search(self, retriever: Any, query: Query) -> Any:
        __tracebackhide__ = True
        return self._caller(retriever).call(f"query {brief_repr(query.qid)}", retriever.search, query.text,
                                            self.options.k)

    def _prefetch(self, retriever: Any, upcoming: Sequence[Query]) -> None:
        """Fill the cache with one ``search_batch`` call; on failure fall back to per-query.

        With a timeout the batch may take ``timeout`` seconds per query in it. A
        batch that overruns, or returns something other than one result list per
        query, turns batching off for the rest of the run (each query then gets
        its own ``search`` and deadline), and a warning says so once: the user
        would otherwise pay for every query twice without knowing.
        """
        __tracebackhide__ = True
        self._prefetched.clear()
        upcoming = [q for q in upcoming if q.qid not in self._unbatched]
        texts = [q.text for q in upcoming]
        what = f"search_batch of {len(texts)} queries"
        try:
            results = self._caller(retriever).call(what, retriever.search_batch, texts, self.options.k,
                                                   queries=len(texts))
        except RetrievalTimeout:
            per_query = self.options.timeout or 0.0  # set: only a deadline raises this
            self._stop_batching(retriever, f"{what} did not finish within its deadline of {per_query * len(texts):g} "
                                           f"s (--rag-timeout {per_query:g} s per query) and was abandoned")
            return
        except Exception as exc:  # one bad query must not fail its neighbours: retry one by one
            self._unbatched.update(q.qid for q in upcoming)  # and never batch them again
            self._warn_batch(retriever, f"search_batch raised {brief_repr(exc)}; the {len(texts)} queries "
                                        "of that batch are searched one at a time with search instead (later "
                                        "batches still use search_batch; their failures are not reported again)")
            return
        try:
            results = list(results)
        except TypeError:
            self._stop_batching(retriever, f"search_batch returned {brief_repr(results)} for a batch of "
                                           f"{len(texts)} queries, expected a list of {len(texts)} result lists")
            return
        if len(results) != len(upcoming):
            self._stop_batching(retriever, f"search_batch returned {len(results)} result lists for a batch of "
                                           f"{len(texts)} queries; it must return one per query, in order")
            return
        for q, r in zip(upcoming, results):
            self._prefetched[q.qid] = r

    def _stop_batching(self, retriever: Any, why: str) -> None:
        self._batch_off = True
        self._warn_batch(retriever, f"{why}. The plugin stopped calling search_batch and calls search once per "
                                    "query for the rest of this run")

    def _warn_batch(self, retriever: Any, text: str) -> None:
        """Warn once a run, pointing at the retriever's search_batch when its source is known."""
        if self._batch_warned:
            return
        self._batch_warned = True
        function = getattr(retriever.search_batch, "__func__", retriever.search_batch)
        code = getattr(function, "__code__", None)
        where = (code.co_filename, code.co_firstlineno) if code is not None else (str(self.collect_path), 1)
        warnings.warn_explicit(f"ragmetrics: {text}", RagMetricsWarning, *where)

    def retrieve(self, retriever: Any, query: Query, upcoming: Callable[[], Sequence[Query]]) -> Any:
        __tracebackhide__ = True
        if query.qid in self._prefetched:
            return self._prefetched.pop(query.qid)
        if (callable(getattr(retriever, "search_batch", None)) and self.options.repeat == 1 and not self._batch_off
                and query.qid not in self._unbatched):
            self._prefetch(retriever, upcoming())
            if query.qid in self._prefetched:
                return self._prefetched.pop(query.qid)
        return self._search(retriever, query)

    def run_query(self, retriever: Any, query: Query,
                  upcoming: Callable[[], Sequence[Query]] = lambda: ()) -> tuple[QueryRecord, list[Drop]]:
        """Retrieve, map, dedup, score and compare one query.

        Raises what the retriever raised (after recording the error), or
        :class:`RetrieverError` for a result that is not a ranking.
        """
        __tracebackhide__ = True  # a failing retriever's own frames are what its user needs to see
        if not self._described:
            self._described = True
            describe = getattr(retriever, "describe", None)
            try:
                self.retriever_description = describe() if callable(describe) else type(retriever).__name__
            except Exception as exc:  # describing is optional; never fail a query on it
                self.retriever_description = f"{type(retriever).__name__} (describe() raised {exc!r})"
        try:
            returned = normalize_results(self.retrieve(retriever, query, upcoming), self.options.k, query.qid)
            for _ in range(self.options.repeat - 1):
                again = normalize_results(self._search(retriever, query), self.options.k, query.qid)
                if again.ids != returned.ids:
                    first = next(i for i, (a, b) in enumerate(zip(returned.ids + [None], again.ids + [None]))
                                 if a != b)
                    raise RetrieverError(
                        f"query {query.qid!r}: the ranking changed between repeated runs "
                        f"(first difference at rank {first + 1}: {returned.ids[first:first + 1]} vs "
                        f"{again.ids[first:first + 1]}); a system compared with itself must score identically"
                    )
        except Exception as exc:
            # The item re-raises this; the record rides along so the gate counts the error.
            exc.ragmetrics_record = QueryRecord(  # type: ignore[attr-defined]
                query.qid, "error", error=f"{type(exc).__name__}: {exc}")
            raise
        docs, metrics = score_query(returned.ids, query.judgments, self.config, self._ideal.get(query.qid))
        explains = _explains_per_document(returned, docs, self.config.id_separator)
        if metrics is None:
            return QueryRecord(query.qid, "unscorable", None, docs, explains, len(docs),
                               truncated_from=returned.truncated_from), []
        record = QueryRecord(query.qid, "scored", metrics, docs, explains, len(docs),
                             truncated_from=returned.truncated_from)
        if any(p is not None for p in returned.parents):
            record.parent_level = score_parents(returned.ids, returned.parents, query.judgments,
                                                self.config, self.options.k)
        drops = query_drops(metrics, self.baseline.metrics_of(query.qid), self.thresholds) \
            if self.baseline is not None and query.qid in self.baseline.per_query and not self.options.update_baseline \
            else []
        return record, drops

    # -------------------------------------------------------------- controller side

    def add_record(self, data: dict[str, Any]) -> None:
        record = QueryRecord.from_dict(data)
        self.records[record.qid] = record
        if "retriever" in data and self.retriever_description is None:
            self.retriever_description = data["retriever"]

    def record_payload(self, record: QueryRecord) -> dict[str, Any]:
        data = record.to_dict()
        if self.retriever_description is not None and not getattr(self, "_sent_description", False):
            self._sent_description = True
            data["retriever"] = self.retriever_description
        return data

    def verdict(self) -> Verdict:
        if self._verdict is None:
            self._verdict = build_verdict(
                self.records, self.golden, None if self.options.update_baseline else self.baseline,
                self.thresholds, self.metrics, self.config.relevance_level, self.full_golden,
            )
        return self._verdict

    def meta(self) -> dict[str, Any]:
        from pytest_ragmetrics import __version__

        try:
            source = str(self.options.golden.resolve().relative_to(self.rootdir.resolve()))
        except ValueError:
            source = str(self.options.golden)
        return {
            "golden": {"source": source, "sha256": self.full_golden.fingerprint(),
                       "n_queries": len(self.full_golden)},
            "measurement": self.config.to_dict(),
            "k": self.options.k,
            "retriever": self.retriever_description,
            "package_version": __version__,
            "git_commit": git_commit(self.rootdir),
            "created": self.created,
        }

    def write_baseline(self) -> str:
        """Write the baseline from this run's records; return what changed, as text.

        Refuses (raising) when the run was partial or a query errored: a baseline
        must describe the whole golden set as the retriever really answers it.
        """
        missing = [q.qid for q in self.full_golden if q.qid not in self.records]
        if missing:
            raise BaselineError(
                f"not writing {self.options.baseline}: "
                f"{counted(len(missing), 'golden query', 'golden queries')} did not run "
                f"(e.g. {', '.join(missing[:5])}); update the baseline from a full, unfiltered run"
            )
        errored = [qid for qid, r in self.records.items() if r.status == "error"]
        if errored:
            raise BaselineError(
                f"not writing {self.options.baseline}: {counted(len(errored), 'query', 'queries')} errored "
                f"({', '.join(errored[:5])}); fix the retriever first"
            )
        scored = {q.qid: self.records[q.qid] for q in self.full_golden if self.records[q.qid].status == "scored"}
        if not scored:
            raise BaselineError(
                f"not writing {self.options.baseline}: no query could be scored (none has a document judged "
                f"relevant at level {self.config.relevance_level}); a baseline must measure something"
            )
        per_query = {
            qid: {**(r.metrics or {}), "_judgments": self.full_golden[qid].judgments_digest()}
            for qid, r in scored.items()
        }
        aggregate = mean_metrics((r.metrics or {} for r in scored.values()), self.metrics)
        new = Baseline(self.meta(), aggregate, per_query, str(self.options.baseline))
        change = describe_change(self.baseline, new, self.metrics, self.unreadable_baseline)
        write_baseline(self.options.baseline, new)
        self.baseline_written = change
        return change

    def artifact(self) -> dict[str, Any]:
        """The JSON run artifact: config, per-query results, aggregates, comparison."""
        verdict = self.verdict()
        per_query = {}
        for q in self.golden:
            r = self.records.get(q.qid)
            if r is None:
                continue
            per_query[q.qid] = {"status": r.status, "metrics": r.metrics, "ranking": r.ranking,
                                "tags": list(q.tags), "error": r.error, "n_docs": r.n_docs,
                                "_judgments": q.judgments_digest()}  # lets `ragmetrics compare` spot changed labels
            if r.parent_level is not None:
                per_query[q.qid]["parent_level"] = r.parent_level
            if self.baseline is not None and q.qid in self.baseline.per_query and not self.options.update_baseline:
                per_query[q.qid]["baseline"] = self.baseline.metrics_of(q.qid)
        meta = self.meta()
        meta["subset"] = self.options.subset
        return {
            "_meta": meta,
            "aggregate": {row.metric: row.now for row in verdict.aggregate},
            "n": verdict.n,
            "per_query": per_query,
            "comparison": verdict.to_dict(),
        }

    def write_artifact(self, path: Path) -> None:
        """Write the run artifact atomically; an unwritable path is a :class:`RagMetricsError`."""
        try:
            atomic_write_json(path, self.artifact())
        except OSError as exc:
            raise RagMetricsError(f"cannot write the run report {path}: {write_problem(path, exc)}") from None

    def write_html(self, path: Path) -> None:
        from pytest_ragmetrics.report.html import render_html

        artifact = self.artifact()
        artifact["_meta"]["worst_n"] = self.worst_n
        try:
            atomic_write_text(path, render_html(artifact))
        except OSError as exc:
            raise RagMetricsError(f"cannot write the HTML report {path}: {write_problem(path, exc)}") from None


    def leakage_warning(self) -> str | None:
        """Golden questions found (near-)verbatim in ``rag_corpus``: numbers that look too
        good usually mean the questions are in the index (seed 001's warning)."""
        if self.options.corpus is None:
            return None
        from pytest_ragmetrics.tools.leakage import check_leakage

        try:
            report = check_leakage(self.golden, self.options.corpus)
        except RagMetricsError as exc:
            return f"Leakage check skipped: {exc}"
        leaked = report.leaked_qids
        if not leaked:
            return None
        best = {}
        for leak in report.leaks:
            if leak.qid not in best or leak.overlap > best[leak.qid].overlap:
                best[leak.qid] = leak
        shown = ", ".join(f"{q} ({best[q].doc_id}, {best[q].kind} {best[q].overlap:.2f})" for q in leaked[:10])
        return (f"WARNING: {len(leaked)} of {report.n_questions} golden questions appear verbatim or nearly so in "
                f"the corpus {self.options.corpus}: {shown}{' …' if len(leaked) > 10 else ''}. Scores on them "
                f"measure copying, not retrieval; `ragmetrics leakage` lists every match.")

    def append_markdown(self, path: Path) -> None:
        """Append the Markdown verdict (``$GITHUB_STEP_SUMMARY`` is appended to, never replaced)."""
        from pytest_ragmetrics.report.markdown import verdict_markdown

        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(verdict_markdown(self.verdict(), self.worst_n) + "\n")
        except OSError as exc:
            raise RagMetricsError(f"cannot append the Markdown summary to {path}: {write_problem(path, exc)}") from None


def _explains_per_document(returned: Any, docs: list[str], separator: str | None) -> list[str | None]:
    """The explanation of the best-ranked result behind each document."""
    if not any(returned.explains):
        return []
    first: dict[str, str | None] = {}
    for rid, why in zip(returned.ids, returned.explains):
        doc = document_of(rid, separator)
        if doc not in first:
            first[doc] = (f"{rid}: {why}" if rid != doc and why else why)
    return [first.get(d) for d in docs]


def describe_change(old: Baseline | None, new: Baseline, metrics: Sequence[str],
                    unreadable: str | None = None) -> str:
    """What a baseline refresh changes, for the terminal and the pull request.

    ``unreadable`` is why the previous file could not be read, when there was one:
    it was replaced, and saying "no previous baseline" would hide that.
    """
    from pytest_ragmetrics.report.text import signed_delta

    lines = [f"Baseline written: {new.path} ({counted(len(new.per_query), 'query', 'queries')})."]
    if old is None:
        lines.append(f"The previous file could not be read and was replaced, so nothing was compared: {unreadable}"
                     if unreadable else "No previous baseline.")
        return "\n".join(lines)
    added = sorted(set(new.per_query) - set(old.per_query))
    removed = sorted(set(old.per_query) - set(new.per_query))
    if added:
        lines.append(f"Queries added: {len(added)} ({_some(added, 10)})")
    if removed:
        lines.append(f"Queries removed: {len(removed)} ({_some(removed, 10)})")
    both = sorted(set(new.per_query) & set(old.per_query))
    for m in metrics:
        before, after = old.aggregate.get(m), new.aggregate.get(m)
        ups, downs = [], []
        for qid in both:
            a, b = old.per_query[qid].get(m), new.per_query[qid].get(m)
            if a is None or b is None:
                continue
            if b > a + 1e-9:
                ups.append(qid)
            elif b < a - 1e-9:
                downs.append(qid)
        if after is None:
            lines.append(f"  {m}: no scored query")
        elif before is None:
            lines.append(f"  {m}: {after:.4f} (new metric)")
        else:
            moved = [f"{word} {len(q)}" + (f" ({_some(q, 3)})" if q else "")
                     for word, q in (("up", ups), ("down", downs))]
            lines.append(f"  {m}: {before:.4f} -> {after:.4f} ({signed_delta(after - before)}); "
                         f"queries {', '.join(moved)}")
    return "\n".join(lines)


def _some(qids: Sequence[str], shown: int) -> str:
    """The first ``shown`` ids, then "…" if there are more."""
    return ", ".join(qids[:shown]) + (" …" if len(qids) > shown else "")
