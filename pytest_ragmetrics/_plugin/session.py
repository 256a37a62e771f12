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
from pytest_ragmetrics.gate.ratchet import RatchetBase, ratchet_base
from pytest_ragmetrics.gate.staleness import LabelAges, check_tags, label_ages
from pytest_ragmetrics.gate.subset import select_smoke
from pytest_ragmetrics.gate.thresholds import Thresholds, load_thresholds
from pytest_ragmetrics.gate.verdict import GatePlan, QueryRecord, ScopeCheck, find_renames, gate_names
from pytest_ragmetrics.gold import GoldCheck, check_gold
from pytest_ragmetrics.golden import GoldenSet, load_golden
from pytest_ragmetrics.report.tables import counted
from pytest_ragmetrics.report.text import REFRESH_COMMAND
from pytest_ragmetrics.scope import check_gold_scope
from pytest_ragmetrics.unjudged import top_grade

__all__ = ["RagSession", "RECORD_KEY", "UnreadThresholds", "unread_thresholds"]

#: The user_properties key a query item's record travels under.
RECORD_KEY = "ragmetrics"


_DEFAULTS_GATE = ("the built-in defaults gate this run (no drop of recall@k, or of the first metric when no "
                  "recall@k is measured)")


@dataclasses.dataclass(frozen=True)
class UnreadThresholds:
    """A thresholds file that exists and that this run does not read, and why (for the header and
    the summary: a reader must not take the defaults for the team's thresholds)."""

    path: Path
    why: str

    def __str__(self) -> str:
        return str(self.path)


def unread_thresholds(options: RagOptions) -> UnreadThresholds | None:
    """The thresholds file a reader may think is in force and is not, or None.

    With ``rag_thresholds = defaults``: a thresholds file beside the baseline, or at its usual
    place. With rag_thresholds unset, the file read is the one beside the baseline in use; when
    that one is absent, a file at the usual place (``baselines/thresholds.json``) is not read.
    """
    if options.thresholds is None:
        for path in dict.fromkeys((options.baseline.parent / "thresholds.json", options.usual_thresholds)):
            if path is not None and path.is_file():
                return UnreadThresholds(path, f"rag_thresholds is set to defaults, so {_DEFAULTS_GATE}")
        return None
    usual = options.usual_thresholds
    if options.thresholds_given or options.thresholds.exists() or usual is None or not usual.is_file():
        return None
    if usual.resolve() == options.thresholds.resolve():
        return None
    return UnreadThresholds(usual, f"the thresholds file read is the one beside the baseline in use, "
                                   f"{options.thresholds}, which does not exist, so {_DEFAULTS_GATE}; move the "
                                   "file beside the baseline, or name it with rag_thresholds")


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
        #: a thresholds file that exists and that this run does not read (the header and summary say so)
        self.unused_thresholds: UnreadThresholds | None = unread_thresholds(options)
        self.baseline: Baseline | None = None
        #: why an existing baseline could not be read when --rag-update-baseline replaces it
        self.unreadable_baseline: str | None = None
        self.mismatch: list[str] = []
        #: relevant gold ids checked against the corpus (rag_corpus now, else the retriever's doc_ids())
        self.gold_check: GoldCheck | None = None
        #: why rag_corpus could not be read for the check (the leakage check says it again)
        self.gold_unchecked: str | None = None
        self._gold_from_retriever = False
        #: each corpus document's metadata (rag_corpus's JSONL fields, else the retriever's doc_metadata()),
        #: checked against a record's scope
        self.corpus_metadata: dict[str, Any] | None = None
        #: where corpus_metadata came from when the retriever gave it (its doc_metadata()), or why it could not
        self.scope_from_retriever: ScopeCheck | None = None
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
        # a shard's gate items are skipped: its gates are judged over every shard by `ragmetrics merge`
        #: what decides the run's gates, known before any query runs
        self.plan = GatePlan(tuple(self.metrics), self.thresholds, self.pooled, bool(self.full_golden.scoped()),
                             ratchet=self.ratchet is not None and self.ratchet.ref is not None)
        self.gates = gate_names(self.plan)
        golden_path = options.golden.resolve()
        #: The file the golden set's items hang from (a folder's queries.jsonl).
        self.collect_path = golden_path / "queries.jsonl" if golden_path.is_dir() else golden_path
        self.records: dict[str, QueryRecord] = {}
        #: query id -> the reason it was skipped (pytest.skip, a skip marker, the fixture's skip): not judged
        self.skipped: dict[str, str] = {}
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

    def scope_check(self) -> ScopeCheck:
        """What each record's ``scope`` was checked against: the corpus (--rag-corpus), or only the
        metadata the retriever returned with its results."""
        if not self.full_golden.scoped():
            return ScopeCheck()
        if self.corpus_metadata is not None and self.options.corpus is not None:
            return ScopeCheck("corpus", f"the corpus {self._shown_path(self.options.corpus)}")
        if self.scope_from_retriever is not None:
            return self.scope_from_retriever
        return ScopeCheck("results", "only the metadata the retriever returned with each result")

    def scope_header(self) -> str | None:
        """The header's line on what each record's scope is checked against (None: no record has a scope)."""
        if not self.full_golden.scoped():
            return None
        if self.corpus_metadata is not None and self.options.corpus is not None:
            return (f"scope: checked against the corpus {self._shown_path(self.options.corpus)} (an independent "
                    "source) and the metadata of each result")
        return ("scope: checked against the retriever's doc_metadata() when it has one (read at the first query), "
                "else only against the metadata it returns with each result, which a layer that drops the filters "
                "and copies them into every result would pass; give --rag-corpus for an independent check")

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
