"""``--rag-*`` flags and ``rag_*`` ini keys resolved into one :class:`RagOptions`.

Flags win over ini keys; paths from the command line are relative to the
invocation directory, paths from the ini file to the ini file's folder. Every
value is checked here, before anything is loaded or retrieved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.measures import MeasurementConfig, parse_measures
from pytest_ragmetrics.unanswerable import parse_threshold

__all__ = ["RagOptions", "build_options", "DEFAULT_THRESHOLDS"]

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
    setup_timeout: float | None = None  # seconds the rag_retriever fixture may take; None: no limit
    thresholds_given: bool = False  # named by the user, so it must exist
    allow_missing_gold: bool = False  # --rag-update-baseline may write gold ids the corpus lacks
    judgments: str | None = None  # closed | pooled, overriding the golden set's own; None: the set's
    judgments_from: str = ""  # "--rag-judgments" or "ini rag_judgments", for the report header
    #: a result scoring under this does not count as a false retrieval (None: any result does)
    answer_threshold: float | None = None


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
        raise RagMetricsError(f"--rag-k / rag_k must be a positive integer, got {raw_k!r}") from None
    if k is not None and k < 1:
        raise RagMetricsError(f"--rag-k / rag_k must be a positive integer, got {k}")
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
    if get("rag_thresholds", "") == "":  # `--rag-thresholds=$UNSET` must not switch the gates off
        raise RagMetricsError(
            "--rag-thresholds was given an empty path (an unset variable?); name a thresholds file, or set "
            "ini rag_thresholds = \"\" to gate with the built-in defaults on purpose")
    thresholds_given = thresholds is not None  # the ini default is None: only the user sets it
    if thresholds is None:
        thresholds = DEFAULT_THRESHOLDS
    subset, _ = pick("rag_subset", "rag_subset")
    smoke, _ = pick("", "rag_smoke")
    report = get("rag_report", "")
    html = get("rag_html", "")
    markdown = get("rag_markdown", "")
    corpus, c_cli = pick("rag_corpus", "rag_corpus")
    repeat = _count("--rag-repeat", get("rag_repeat", ""), 1, minimum=1)
    batch_size = _count("--rag-batch-size", get("rag_batch_size", ""), 32, minimum=1)
    worst = _count("--rag-worst", get("rag_worst", ""), None, minimum=0)
    raw_timeout, _ = pick("rag_timeout", "rag_timeout")
    timeout = _parse_timeout(raw_timeout)
    raw_setup, _ = pick("rag_setup_timeout", "rag_setup_timeout")
    setup_timeout = _parse_timeout(raw_setup, "--rag-setup-timeout / rag_setup_timeout")
    judgments, j_cli = pick("rag_judgments", "rag_judgments")
    if judgments not in (None, "") and judgments not in ("closed", "pooled"):
        raise RagMetricsError(f"{'--rag-judgments' if j_cli else 'ini rag_judgments'} must be closed or pooled, got "
                              f"{judgments!r} (closed: documents the golden set does not list are not relevant; "
                              "pooled: they are unjudged)")
    raw_answer, _ = pick("rag_answer_threshold", "rag_answer_threshold")
    try:
        answer_threshold = parse_threshold(raw_answer, "--rag-answer-threshold / rag_answer_threshold")
    except ValueError as exc:
        raise RagMetricsError(str(exc)) from None
    corpus_path = resolve(corpus, c_cli) if corpus else None
    if corpus_path is not None and not corpus_path.exists():
        # a typo must not switch the leakage check off with one line at the end of the summary
        raise RagMetricsError(f"--rag-corpus / rag_corpus: {corpus_path}: no such corpus file or folder")
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
        corpus=corpus_path,
        worst=worst,
        repeat=repeat,
        batch_size=batch_size,
        timeout=timeout,
        setup_timeout=setup_timeout,
        thresholds_given=thresholds_given and bool(thresholds),
        allow_missing_gold=bool(get("rag_allow_missing_gold", "")),
        judgments=judgments or None,
        judgments_from="--rag-judgments" if j_cli else "ini rag_judgments",
        answer_threshold=answer_threshold,
    )


def _count(flag: str, raw: Any, default: int | None, minimum: int) -> Any:
    """An integer option; ``None``/empty is the default, anything below ``minimum`` a usage error."""
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or value < minimum:
        raise RagMetricsError(f"{flag} must be an integer >= {minimum}, got {raw!r}")
    return value


def _parse_timeout(raw: Any, name: str = "--rag-timeout / rag_timeout") -> float | None:
    """A timeout option: seconds > 0; empty or ``none`` mean no limit.

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
        raise RagMetricsError(f"{name} must be a number of seconds > 0 (or 'none'), got {raw!r}{hint}")
    return value
