"""The judge side of a ``pytest --rag-eval`` session: from the records to the verdict to the baseline.

Only the process that judges (a serial run, the xdist controller) uses its
:class:`Judge`: records arrive from the query items' reports, the verdict is built
once from them, and a ``--rag-update-baseline`` run writes the baseline from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_ragmetrics._plugin.outputs import meta
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.gate.baseline import baseline_from_records, write_baseline
from pytest_ragmetrics.gate.gitref import author_from_git
from pytest_ragmetrics.gate.lowering import gated_in_files, gated_metrics, refresh_lowerings
from pytest_ragmetrics.gate.verdict import QueryRecord, RunInputs, ScopeCheck, Verdict, judge_run
from pytest_ragmetrics.gold import GoldCheck
from pytest_ragmetrics.report.text import baseline_change_text
from pytest_ragmetrics.unanswerable import FALSE_RETRIEVAL

if TYPE_CHECKING:
    from pytest_ragmetrics._plugin.session import RagSession

__all__ = ["Judge"]


class Judge:
    """The verdict and the baseline of one run, from the records its query items produced."""

    def __init__(self, rag: RagSession) -> None:
        self.rag = rag
        self._verdict: Verdict | None = None

    def add_record(self, data: dict[str, Any]) -> None:
        rag = self.rag
        record = QueryRecord.from_dict(data)
        rag.records[record.qid] = record
        if "retriever" in data and rag.retriever_description is None:
            rag.retriever_description = data["retriever"]
        if "gold_check" in data and rag.gold_check is None:
            rag.gold_check = GoldCheck.from_dict(data["gold_check"])
            rag._gold_from_retriever = True
        if isinstance(data.get("scope_check"), dict) and rag.scope_from_retriever is None:
            rag.scope_from_retriever = ScopeCheck(str(data["scope_check"]["source"]),
                                                  str(data["scope_check"].get("detail") or ""))
        if "gold_unchecked" in data and rag.gold_check is None and rag.gold_unchecked is None:
            rag.gold_unchecked = data["gold_unchecked"]
            rag._gold_from_retriever = True

    def verdict(self) -> Verdict:
        rag = self.rag
        if self._verdict is None:
            # a skipped query is not judged: the baseline gate names it with its reason, not as "did not run"
            skipped = {q.qid: rag.skipped[q.qid] for q in rag.golden
                       if q.qid in rag.skipped and q.qid not in rag.records}
            self._verdict = judge_run(RunInputs(
                records=rag.records, golden=rag.golden, full_golden=rag.full_golden,
                baseline=None if rag.options.update_baseline else rag.baseline,
                baseline_path=str(rag.options.baseline), thresholds=rag.thresholds, metrics=tuple(rag.metrics),
                relevance_level=rag.config.relevance_level, reference="the baseline", labels=rag.labels,
                artifact_path=rag._shown_path(rag.options.report) if rag.options.report else None,
                answer_threshold=rag.options.answer_threshold, lacking={}, scope=rag.scope_check(),
                skipped=skipped, ratchet=rag.ratchet,
            ))
            if rag.options.shard is not None:  # a part of the set: its gates are judged by `ragmetrics merge`
                from pytest_ragmetrics.gate.shard import defer_gates

                judged = self._verdict
                self._verdict = defer_gates(judged, *rag.options.shard)
                if judged.not_run:  # its own queries skipped or deselected: merge cannot run them, so it fails
                    own = next(g for g in judged.gates if g.name == "baseline")
                    self._verdict.gates = [own if g.name == "baseline" else g for g in self._verdict.gates]
                    self._verdict.deferred = [n for n in self._verdict.deferred if n != "baseline"]
        return self._verdict

    def write_baseline(self) -> str:
        """Write the baseline from this run's records; return what changed, as text.

        Refuses (raising) when the run was partial or a query errored: a baseline
        must describe the whole golden set as the retriever really answers it; and when it
        would lower a gated value without ``--rag-reason`` (see :mod:`pytest_ragmetrics.gate.lowering`).
        """
        rag = self.rag
        new = baseline_from_records(rag.records, rag.full_golden, rag.metrics, rag.config.relevance_level,
                                    lambda: meta(rag), rag.gold_check, rag.options.allow_missing_gold,
                                    rag.options.baseline)
        # a refresh that lowers a gated value needs --rag-reason, which is kept in _meta.lowerings
        author = author_from_git(rag.options.baseline.parent) if rag.options.reason else None
        # what the thresholds in force gate, and what the baseline being replaced was gated with: a refresh that
        # loosens thresholds.json in the same breath cannot lower what the old thresholds guarded
        gated = gated_metrics(rag.thresholds, rag.metrics) | (gated_in_files(rag.baseline.meta) if rag.baseline else
                                                               frozenset())
        lowerings = refresh_lowerings(rag.baseline, new, gated, rag.options.reason,
                                      time=rag.created, author=author, path=rag._shown_path(rag.options.baseline))
        if lowerings.entries:
            new.meta["lowerings"] = lowerings.entries
        change = "\n".join([baseline_change_text(rag.baseline, new, rag.metrics, rag.unreadable_baseline),
                            *lowerings.notes])
        write_baseline(rag.options.baseline, new)
        rag.baseline_written = change
        return change

    def lowerings_summary(self, markdown: bool = False) -> str | None:
        """What the baseline in use records it was lowered for (``_meta.lowerings``): the terminal's
        lines, or the Markdown summary's section; None when it records none (or a refresh replaces it)."""
        rag = self.rag
        if rag.baseline is None or rag.options.update_baseline:
            return None
        from pytest_ragmetrics.gate.lowering import recorded_lowerings
        from pytest_ragmetrics.report.lowering import lowerings_markdown, lowerings_summary

        show = lowerings_markdown if markdown else lowerings_summary
        return show(recorded_lowerings(rag.baseline.meta), rag._shown_path(rag.options.baseline))

    def pooled_summary(self) -> str:
        """The report's pooled-set part (see :func:`pytest_ragmetrics.report.pooled.pooled_text`)."""
        rag = self.rag
        from pytest_ragmetrics.report.pooled import pooled_text

        verdict = self.verdict()
        return pooled_text(verdict, rag.options.k, self.document_texts() if verdict.inconclusive else None,
                           self.baseline_lacks_top(),
                           rag._shown_path(rag.options.report) if rag.options.report else None,
                           str(rag.options.golden))

    def pooled_markdown(self) -> str:
        """The pooled-set part of the Markdown summary (:func:`pytest_ragmetrics.report.pooled.pooled_markdown`)."""
        rag = self.rag
        from pytest_ragmetrics.report.pooled import pooled_markdown

        verdict = self.verdict()
        return pooled_markdown(verdict, rag.options.k, self.document_texts() if verdict.inconclusive else None,
                               self.baseline_lacks_top(),
                               rag._shown_path(rag.options.report) if rag.options.report else None,
                               str(rag.options.golden))

    def document_texts(self) -> dict[str, str] | None:
        """Document id -> text when the corpus is known (rag_corpus), for snippets; None otherwise."""
        rag = self.rag
        if rag.options.corpus is None:
            return None
        from pytest_ragmetrics.corpus import load_corpus

        try:
            return {d.doc_id: f"{d.title}\n{d.text}" if d.title else d.text for d in load_corpus(rag.options.corpus)}
        except RagMetricsError:
            return None

    def baseline_lacks_top(self) -> bool:
        """A pooled run compared with a baseline written before ``_top`` existed: new unjudged
        documents cannot be told from old ones until the baseline is refreshed."""
        rag = self.rag
        return rag.pooled and rag.baseline is not None and not rag.options.update_baseline and \
            any("_top" not in e for e in rag.baseline.per_query.values() if FALSE_RETRIEVAL not in e)
