"""State of one ``pytest --rag-eval`` session, kept out of the hooks.

Every process (serial run, xdist controller, xdist worker) builds one
:class:`RagSession` at configure time from the options and files. Workers only
retrieve and score; records travel to the controller inside the reports'
``user_properties`` (the same path in a serial run), and only the controller,
or the single process of a serial run, aggregates, gates and writes files.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from pathlib import Path
from typing import Any, Callable, Sequence

from pytest_ragmetrics._plugin.options import RagOptions
from pytest_ragmetrics._plugin.outputs import meta
from pytest_ragmetrics._plugin.retrieval import Retrieval
from pytest_ragmetrics._plugin.deadline import RetrieverBusy
from pytest_ragmetrics.errors import BaselineError, RagMetricsError, RetrieverError, brief_repr, listed, shown
from pytest_ragmetrics.evaluation import mean_metrics, score_query
from pytest_ragmetrics.gate.baseline import (Baseline, fingerprint_mismatch, load_baseline, threshold_mismatch,
                                             write_baseline)
from pytest_ragmetrics.gate.thresholds import Thresholds, load_thresholds
from pytest_ragmetrics.gate.subset import select_smoke
from pytest_ragmetrics.gate.staleness import LabelAges, check_tags, label_ages
from pytest_ragmetrics.gate.verdict import QueryRecord, Verdict, build_verdict, find_renames, gate_names, judge_query
from pytest_ragmetrics.gold import GoldCheck, check_gold, retriever_doc_ids
from pytest_ragmetrics.golden import GoldenSet, Query, load_golden
from pytest_ragmetrics.metrics import document_of, document_ranking, ideal_grades
from pytest_ragmetrics.parents import score_parents
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.report.text import REFRESH_COMMAND, baseline_change_text
from pytest_ragmetrics.results import normalize_results
from pytest_ragmetrics.unjudged import measure_unjudged, top_grade
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL, RATE, false_retrieval, false_retrieval_rate

__all__ = ["RagSession", "RECORD_KEY"]

#: The user_properties key a query item's record travels under.
RECORD_KEY = "ragmetrics"


class RagSession:
    """Golden set, baseline, thresholds and the records of one run."""

    def __init__(self, options: RagOptions, is_worker: bool, rootdir: Path) -> None:
        self.options = options
        self.is_worker = is_worker
        self.rootdir = rootdir
        self.config = options.measurement
        self.metrics = self.config.metric_names
        self.full_golden: GoldenSet = load_golden(options.golden, id_separator=self.config.id_separator)
        if options.judgments is not None:  # the ini option (or its flag) overrides the file and the default
            self.full_golden = dataclasses.replace(self.full_golden, judgments=options.judgments,
                                                   judgments_from=options.judgments_from)
        #: a pooled set: unlisted documents are unjudged (see pytest_ragmetrics.unjudged)
        self.pooled = self.full_golden.judgments == "pooled"
        self.top_grade = top_grade(self.full_golden, self.config.relevance_level)
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
        check_tags(self.thresholds, self.full_golden.tags())
        #: how old this run's labels are under the age limits (None: thresholds.json sets none)
        self.labels: LabelAges | None = label_ages(self.golden, self.thresholds)
        #: a thresholds file at the default path that an empty rag_thresholds keeps out of this run
        self.unused_thresholds: Path | None = None
        if options.thresholds is None:
            from pytest_ragmetrics._plugin.options import DEFAULT_THRESHOLDS

            default = rootdir / DEFAULT_THRESHOLDS
            self.unused_thresholds = default if default.exists() else None
        self.baseline: Baseline | None = None
        #: why an existing baseline could not be read when --rag-update-baseline replaces it
        self.unreadable_baseline: str | None = None
        self.mismatch: list[str] = []
        if options.update_baseline:
            try:  # unsealed is fine here: it is about to be replaced, and the diff is still shown
                self.baseline = load_baseline(options.baseline, sealed=False)
            except BaselineError as exc:
                self.baseline = None  # a broken or missing one is about to be replaced
                if options.baseline.exists():
                    self.unreadable_baseline = str(exc)
        elif options.baseline.exists():
            self.baseline = load_baseline(options.baseline)
            self._check_baseline(self.baseline)
        #: query id -> the baseline entry it is compared with, for queries renamed since the baseline
        self.baseline_id: dict[str, str] = {new: old for old, new in find_renames(self.full_golden, self.baseline).items()} \
            if self.baseline is not None and not options.update_baseline else {}
        self.gates = gate_names(self.metrics, self.thresholds, self.pooled)
        golden_path = options.golden.resolve()
        #: The file the golden set's items hang from (a folder's queries.jsonl).
        self.collect_path = golden_path / "queries.jsonl" if golden_path.is_dir() else golden_path
        self.records: dict[str, QueryRecord] = {}
        self.retriever_description: Any = None
        self._sent_description = False  # a worker sends the description with its first record only
        #: each collected item's position in run order, built at the first search_batch look-ahead
        self.item_index: dict[str, int] | None = None
        self._described = False
        # --rag-repeat calls search again; a batch cannot be timed query by query
        self.retrieval = Retrieval(options.k, options.timeout,
                                   batching=options.repeat == 1 and options.timeout is None,
                                   fallback_location=str(self.collect_path))
        self._ideal = {q.qid: ideal_grades(q.judgments) for q in self.golden}
        self._verdict: Verdict | None = None
        self.summary: str | None = None
        self.baseline_written: str | None = None
        #: the run artifact, built once for the JSON file and the HTML report (see _plugin/outputs.py)
        self.artifact_data: dict[str, Any] | None = None
        #: one time for every file this run writes, so the artifact and the HTML agree
        self.created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
        #: relevant gold ids checked against the corpus (rag_corpus now, else the retriever's doc_ids())
        self.gold_check: GoldCheck | None = None
        #: why rag_corpus could not be read for the check (the leakage check says it again)
        self.gold_unchecked: str | None = None
        self._gold_from_retriever = False
        if options.corpus is not None:
            from pytest_ragmetrics.corpus import load_corpus

            try:
                ids = [d.doc_id for d in load_corpus(options.corpus)]
            except RagMetricsError as exc:
                self.gold_unchecked = str(exc)
            else:
                self.gold_check = check_gold(self.full_golden, ids, self._shown_path(options.corpus),
                                             self.config.relevance_level, self.config.id_separator)

    def _shown_path(self, path: Path) -> str:
        try:
            return Path(path).resolve().relative_to(self.rootdir.resolve()).as_posix()
        except ValueError:
            return str(path)

    def gold_header(self) -> str:
        """The report header's line on gold ids: how many were checked against what, or why none."""
        if self.gold_check is not None:
            return self.gold_check.header()
        if self.gold_unchecked is not None:
            return f"gold ids: not checked (the corpus cannot be read: {self.gold_unchecked})"
        return ("gold ids: none checked yet (no corpus known: pass --rag-corpus; a retriever with doc_ids() "
                "is checked at the first query)")

    def late_gold_line(self) -> str | None:
        """The summary's line on a gold check made after the header was printed (the retriever's
        ``doc_ids()`` is read at the first query), so the run ends saying what was checked."""
        if not self._gold_from_retriever:
            return None
        if self.gold_check is None:
            return f"WARNING: gold ids not checked: {self.gold_unchecked}"
        return None if self.gold_check.missing else f"ragmetrics: {self.gold_check.header()}"

    def _check_gold_with(self, retriever: Any) -> None:
        """Without rag_corpus, check the gold ids against the retriever's ``doc_ids()`` when it has one."""
        if self.gold_check is not None or self.gold_unchecked is not None:
            return
        try:
            ids = retriever_doc_ids(retriever)
        except Exception as exc:  # the check is optional; never fail a query on it, but say so in the summary
            self._gold_from_retriever = True
            self.gold_unchecked = f"the retriever's doc_ids() raised {type(exc).__name__}: {exc}"
            return
        if ids is not None:
            self._gold_from_retriever = True
            self.gold_check = check_gold(self.full_golden, ids, f"the retriever's doc_ids() ({len(ids)} documents)",
                                         self.config.relevance_level, self.config.id_separator)

    # ------------------------------------------------------------- baseline checks

    def _check_baseline(self, baseline: Baseline) -> None:
        problems = fingerprint_mismatch(baseline.meta, self.config, self.options.k, self.full_golden.judgments)
        problems += threshold_mismatch(baseline, self.options.answer_threshold)
        changed = [
            q.qid for q in self.full_golden
            if q.qid in baseline.per_query
            and baseline.per_query[q.qid].get("_judgments") not in (None, q.judgments_digest())
        ]
        if changed:
            problems.append(f"judgments or text changed for {counted(len(changed), 'query', 'queries')} "
                            "since the baseline: "
                            f"{listed(changed)}")
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
                + f"\nRe-measure it ({REFRESH_COMMAND}, and commit the diff), or pass --rag-accept-mismatch "
                "to compare anyway."
            )
        self.mismatch = problems

    def run_query(self, retriever: Any, query: Query,
                  upcoming: Callable[[], Sequence[Query]] = lambda: ()) -> QueryRecord:
        """Retrieve, map, dedup, score and compare one query; the record carries its drops.

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
            self._check_gold_with(retriever)
        try:
            returned = normalize_results(self.retrieval.retrieve(retriever, query, upcoming), self.options.k, query.qid)
            # What is scored is the document ranking: chunks of one document trading places change nothing.
            ranked = document_ranking(returned.ids, self.config.id_separator) if self.options.repeat > 1 else []
            for _ in range(self.options.repeat - 1):
                again = document_ranking(normalize_results(self.retrieval.search(retriever, query), self.options.k,
                                                           query.qid).ids, self.config.id_separator)
                if again != ranked:
                    first = next(i for i, (a, b) in enumerate(zip(ranked + [None], again + [None])) if a != b)
                    raise RetrieverError(
                        f"query {query.qid!r} is not deterministic: the documents it ranks changed between "
                        f"repeated runs (first difference at rank {first + 1}: {ranked[first:first + 1]} vs "
                        f"{again[first:first + 1]}); a system compared with itself must score identically"
                    )
        except RetrieverBusy:
            raise  # never started: no record, so the query counts as not run
        except Exception as exc:
            # The item re-raises this; the record rides along so the gate counts the error.
            exc.ragmetrics_record = QueryRecord(  # type: ignore[attr-defined]
                query.qid, "error", error=f"{type(exc).__name__}: {exc}")
            raise
        docs, metrics = score_query(returned.ids, query.judgments, self.config, self._ideal.get(query.qid))
        explains = _explains_per_document(returned, docs, self.config.id_separator)
        scores = _scores_per_document(returned, docs, self.config.id_separator)
        entry = self.baseline_id.get(query.qid, query.qid)  # a renamed query keeps its old entry
        compared = self.baseline is not None and entry in self.baseline.per_query and not self.options.update_baseline
        if not query.answerable:  # scored by false retrieval alone (see pytest_ragmetrics.unanswerable)
            found = false_retrieval(returned.scores, self.options.answer_threshold)
            record = QueryRecord(query.qid, "unanswerable", None, docs, explains, len(docs),
                                 truncated_from=returned.truncated_from, scores=scores, false_retrieval=found)
            if compared:
                record.drops, _ = judge_query(record, self.baseline.per_query[entry], self.thresholds,  # type: ignore[union-attr]
                                              answerable=False)
            return record
        lost = self.gold_check.reason(query.qid) if self.gold_check is not None else None
        if metrics is None or lost is not None:  # a query whose gold cannot be retrieved would score 0 forever
            return QueryRecord(query.qid, "unscorable", None, docs, explains, len(docs), error=lost,
                               truncated_from=returned.truncated_from)
        record = QueryRecord(query.qid, "scored", metrics, docs, explains, len(docs),
                             truncated_from=returned.truncated_from, scores=scores)
        if any(p is not None for p in returned.parents):
            record.parent_level = score_parents(returned.ids, returned.parents, query.judgments,
                                                self.config, self.options.k)
        if self.pooled:
            top = self.baseline.per_query[entry].get("_top") if compared else None  # type: ignore[union-attr]
            found = measure_unjudged(docs, query.judgments, metrics, self.config, self.top_grade,
                                     top if isinstance(top, list) else None)
            record.judged, record.unjudged, record.upper, record.upper_new, record.baseline_upper_new = \
                found.judged, found.docs, found.upper, found.upper_new, found.baseline_upper_new
            record.unjudged_new = found.new if compared else None
        if compared:  # once, here: the item, the gate and the JUnit properties read it off the record
            record.drops, record.inconclusive = judge_query(record, self.baseline.per_query[entry],  # type: ignore[union-attr]
                                                            self.thresholds, pooled=self.pooled)
        return record

    def pooled_summary(self) -> str:
        """The report's pooled-set part (see :func:`pytest_ragmetrics.report.pooled.pooled_text`)."""
        from pytest_ragmetrics.report.pooled import pooled_text

        verdict = self.verdict()
        return pooled_text(verdict, self.options.k, self.document_texts() if verdict.inconclusive else None,
                           self.baseline_lacks_top(),
                           self._shown_path(self.options.report) if self.options.report else None)

    def pooled_markdown(self) -> str:
        """The pooled-set part of the Markdown summary (:func:`pytest_ragmetrics.report.pooled.pooled_markdown`)."""
        from pytest_ragmetrics.report.pooled import pooled_markdown

        verdict = self.verdict()
        return pooled_markdown(verdict, self.options.k, self.document_texts() if verdict.inconclusive else None,
                               self.baseline_lacks_top(),
                               self._shown_path(self.options.report) if self.options.report else None)

    def document_texts(self) -> dict[str, str] | None:
        """Document id -> text when the corpus is known (rag_corpus), for snippets; None otherwise."""
        if self.options.corpus is None:
            return None
        from pytest_ragmetrics.corpus import load_corpus

        try:
            return {d.doc_id: f"{d.title}\n{d.text}" if d.title else d.text for d in load_corpus(self.options.corpus)}
        except RagMetricsError:
            return None

    def baseline_lacks_top(self) -> bool:
        """A pooled run compared with a baseline written before ``_top`` existed: new unjudged
        documents cannot be told from old ones until the baseline is refreshed."""
        return self.pooled and self.baseline is not None and not self.options.update_baseline and \
            any("_top" not in e for e in self.baseline.per_query.values())

    # -------------------------------------------------------------- controller side

    def add_record(self, data: dict[str, Any]) -> None:
        record = QueryRecord.from_dict(data)
        self.records[record.qid] = record
        if "retriever" in data and self.retriever_description is None:
            self.retriever_description = data["retriever"]
        if "gold_check" in data and self.gold_check is None:
            self.gold_check = GoldCheck.from_dict(data["gold_check"])
            self._gold_from_retriever = True
        if "gold_unchecked" in data and self.gold_check is None and self.gold_unchecked is None:
            self.gold_unchecked = data["gold_unchecked"]
            self._gold_from_retriever = True

    def record_payload(self, record: QueryRecord) -> dict[str, Any]:
        data = record.to_dict()
        if self.retriever_description is not None and not self._sent_description:
            self._sent_description = True
            data["retriever"] = self.retriever_description
            if self._gold_from_retriever and self.gold_check is not None:  # a worker's check reaches the controller
                data["gold_check"] = self.gold_check.to_dict()
            elif self._gold_from_retriever and self.gold_unchecked is not None:
                data["gold_unchecked"] = self.gold_unchecked
        return data

    def verdict(self) -> Verdict:
        if self._verdict is None:
            self._verdict = build_verdict(
                self.records, self.golden, None if self.options.update_baseline else self.baseline,
                self.thresholds, self.metrics, self.config.relevance_level, self.full_golden,
                baseline_path=str(self.options.baseline), labels=self.labels,
                artifact_path=self._shown_path(self.options.report) if self.options.report else None,
                answer_threshold=self.options.answer_threshold,
            )
        return self._verdict

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
                f"(e.g. {', '.join(map(shown, missing[:5]))}); update the baseline from a full, unfiltered run"
            )
        errored = [qid for qid, r in self.records.items() if r.status == "error"]
        if errored:
            raise BaselineError(
                f"not writing {self.options.baseline}: {counted(len(errored), 'query', 'queries')} errored "
                f"({', '.join(map(shown, errored[:5]))}); fix the retriever first"
            )
        gold = self.gold_check
        if gold is not None and gold.missing and not self.options.allow_missing_gold:
            raise BaselineError(
                f"not writing {self.options.baseline}: {counted(len(gold.missing), 'relevant gold id is', 'relevant gold ids are')} "
                f"not in the corpus ({gold.source}): {listed([m.text() for m in gold.missing])}; such a gold id "
                "can never be retrieved, so it would score 0 in the baseline forever. Fix the golden set, or pass "
                "--rag-allow-missing-gold to write it anyway (the baseline lists them in _meta.allowed_missing_gold)"
            )
        scored = {q.qid: self.records[q.qid] for q in self.full_golden if self.records[q.qid].status == "scored"}
        if not scored:
            raise BaselineError(
                f"not writing {self.options.baseline}: no query could be scored (none has a document judged "
                f"relevant at level {self.config.relevance_level}); a baseline must measure something"
            )
        per_query = {
            qid: {**(r.metrics or {}), "_judgments": self.full_golden[qid].judgments_digest(), "_top": list(r.ranking)}
            for qid, r in scored.items()
        }
        aggregate: dict[str, float] = mean_metrics((r.metrics or {} for r in scored.values()), self.metrics)
        no_answer = {q.qid: self.records[q.qid] for q in self.full_golden if self.records[q.qid].status == "unanswerable"}
        for qid, r in no_answer.items():  # false retrieval only: these questions have no other metric
            per_query[qid] = {FALSE_RETRIEVAL: float(r.false_retrieval or 0),
                              "_judgments": self.full_golden[qid].judgments_digest()}
        if no_answer:
            aggregate[RATE] = false_retrieval_rate(float(r.false_retrieval or 0) for r in no_answer.values())  # type: ignore[assignment]
        described = meta(self)
        if gold is not None and gold.missing:
            described["allowed_missing_gold"] = gold.allowed()
        new = Baseline(described, aggregate, per_query, str(self.options.baseline))
        change = baseline_change_text(self.baseline, new, self.metrics, self.unreadable_baseline)
        write_baseline(self.options.baseline, new)
        self.baseline_written = change
        return change

def _scores_per_document(returned: Any, docs: list[str], separator: str | None) -> list[float | None]:
    """The score of the best-ranked result behind each document (empty when no result has one)."""
    if not any(s is not None for s in returned.scores):
        return []
    first: dict[str, float | None] = {}
    for rid, score in zip(returned.ids, returned.scores):
        first.setdefault(document_of(rid, separator), score)
    return [first.get(d) for d in docs]


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


