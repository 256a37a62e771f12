"""Judging a run in a test: :func:`judge` builds the one inputs record the plugin, compare and merge
build, with the plugin's choices for what a test leaves out."""

from __future__ import annotations

from typing import Mapping, Sequence

from pytest_ragmetrics.gate.baseline import Baseline
from pytest_ragmetrics.gate.thresholds import Thresholds
from pytest_ragmetrics.gate.verdict import QueryRecord, RunInputs, ScopeCheck, Verdict, judge_run
from pytest_ragmetrics.golden import GoldenSet


def judge(records: Mapping[str, QueryRecord], golden: GoldenSet, baseline: Baseline | None, thresholds: Thresholds,
          metrics: Sequence[str], relevance_level: int = 1, full_golden: GoldenSet | None = None,
          **overrides: object) -> Verdict:
    fields: dict[str, object] = dict(
        records=records, golden=golden, full_golden=full_golden or golden, baseline=baseline, baseline_path=None,
        thresholds=thresholds, metrics=tuple(metrics), relevance_level=relevance_level, reference="the baseline",
        labels=None, artifact_path=None, answer_threshold=None, lacking={},
        scope=ScopeCheck("results" if (full_golden or golden).scoped() else "none"), skipped={}, ratchet=None)
    fields.update(overrides)
    return judge_run(RunInputs(**fields))  # type: ignore[arg-type]
