"""State of one ``pytest --rag-eval`` session, kept out of the hooks.

Every process (serial run, xdist controller, xdist worker) builds one
:class:`RagSession` at configure time from the options and files. Its
:class:`~pytest_ragmetrics._plugin.worker.QueryWorker` retrieves and scores;
records travel to the controller inside the reports' ``user_properties`` (the
same path in a serial run), and only the controller, or the single process of a
serial run, uses its :class:`~pytest_ragmetrics._plugin.judge.Judge` to
aggregate, gate and write the baseline.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from pathlib import Path
from typing import Any

from pytest_ragmetrics._plugin.judge import Judge
from pytest_ragmetrics._plugin.options import RagOptions
from pytest_ragmetrics._plugin.worker import QueryWorker
from pytest_ragmetrics.errors import BaselineError, RagMetricsError, brief_repr, listed
from pytest_ragmetrics.gate.baseline import Baseline, fingerprint_mismatch, load_baseline, threshold_mismatch
from pytest_ragmetrics.gate.lowering import LOWERED_GATE, RatchetBase, ratchet_base
from pytest_ragmetrics.gate.staleness import LabelAges, check_tags, label_ages
from pytest_ragmetrics.gate.subset import select_smoke
from pytest_ragmetrics.gate.thresholds import Thresholds, load_thresholds
from pytest_ragmetrics.gate.verdict import QueryRecord, find_renames, gate_names
from pytest_ragmetrics.gold import GoldCheck, check_gold
from pytest_ragmetrics.golden import GoldenSet, load_golden
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.report.text import REFRESH_COMMAND
from pytest_ragmetrics.scope import check_gold_scope
from pytest_ragmetrics.unjudged import top_grade

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
        #: the queries every shard together runs (the set itself when the run is not sharded)
        self.sharded_set: GoldenSet = self.golden
        if options.shard is not None:
            if options.update_baseline:
                raise RagMetricsError(
                    f"--rag-update-baseline cannot refresh from shard {options.shard[0]}/{options.shard[1]}, which "
                    "holds part of the set: run every shard with --rag-report, then `ragmetrics merge SHARDS "
                    "--out run.json --update-baseline` refreshes it from all of them")
            from pytest_ragmetrics.gate.shard import select_shard

            self.golden = select_shard(self.golden, *options.shard)
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
        #: relevant gold ids checked against the corpus (rag_corpus now, else the retriever's doc_ids())
        self.gold_check: GoldCheck | None = None
        #: why rag_corpus could not be read for the check (the leakage check says it again)
        self.gold_unchecked: str | None = None
        self._gold_from_retriever = False
        #: each corpus document's metadata (rag_corpus's JSONL fields), checked against a record's scope
        self.corpus_metadata: dict[str, Any] | None = None
        if options.corpus is not None:
            from pytest_ragmetrics.corpus import corpus_metadata, load_corpus

            try:
                docs = load_corpus(options.corpus)
            except RagMetricsError as exc:
                self.gold_unchecked = str(exc)
            else:
                ids = [d.doc_id for d in docs]
                self.corpus_metadata = corpus_metadata(docs)
                check_gold_scope(self.full_golden, self.corpus_metadata, self.config.id_separator,
                                 self._shown_path(options.golden), self._shown_path(options.corpus))
                self.gold_check = check_gold(self.full_golden, ids, self._shown_path(options.corpus),
                                             self.config.relevance_level, self.config.id_separator)
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
        self.baseline_id: dict[str, str] = \
            {new: old for old, new in find_renames(self.full_golden, self.baseline).items()} \
            if self.baseline is not None and not options.update_baseline else {}
        #: what the ratchet compares the baseline with (--rag-baseline-ref, or a pull request's base, read
        #: from git here, so a ref given that cannot be read stops the run); None: it does not run
        self.ratchet: RatchetBase | None = None
        if not is_worker and not options.update_baseline and options.shard is None:
            self.ratchet = ratchet_base(options.baseline, options.baseline_ref, options.baseline_ref_from,
                                        self._shown_path(options.baseline))
        # a shard collects no gate item: its gates are judged over every shard by `ragmetrics merge`
        self.gates = gate_names(self.metrics, self.thresholds, self.pooled, bool(self.full_golden.scoped())) \
            if options.shard is None else []
        if self.ratchet is not None and self.ratchet.ref is not None:
            self.gates.append(LOWERED_GATE)  # judged in Judge.verdict
        golden_path = options.golden.resolve()
        #: The file the golden set's items hang from (a folder's queries.jsonl).
        self.collect_path = golden_path / "queries.jsonl" if golden_path.is_dir() else golden_path
        self.records: dict[str, QueryRecord] = {}
        self.retriever_description: Any = None
        #: each collected item's position in run order, built at the first search_batch look-ahead
        self.item_index: dict[str, int] | None = None
        self.summary: str | None = None
        self.baseline_written: str | None = None
        #: the run artifact, built once for the JSON file and the HTML report (see _plugin/outputs.py)
        self.artifact_data: dict[str, Any] | None = None
        #: one time for every file this run writes, so the artifact and the HTML agree
        self.created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
        #: retrieves, scores and compares this process's queries
        self.worker = QueryWorker(self)
        #: builds the verdict and writes the baseline (used by the process that judges)
        self.judge = Judge(self)

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
            typos = [m.text() for m in (self.gold_check.missing if self.gold_check else []) if m.qid in changed]
            if typos:  # an edit that brought in a gold id the corpus lacks: fix it before re-measuring
                problems.append(f"of those, gold ids not in the corpus ({self.gold_check.source}): "  # type: ignore[union-attr]
                                f"{listed(typos)}; fix them before re-measuring")
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
