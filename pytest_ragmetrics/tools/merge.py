"""``ragmetrics merge``: the shards of one run (``--rag-shard I/N``), judged as one run.

Each shard's artifact holds its queries' full records (its ``shard`` section). Merging checks
that the shards come from one run (the same ``_meta``, their times aside: golden set,
measurement, k, retriever, commit, thresholds, baseline) and that together they cover the set
exactly once (each of 1..N given once), then judges the merged records with the plugin's own
:func:`~pytest_ragmetrics.gate.verdict.build_verdict` and builds the artifact with
:func:`~pytest_ragmetrics.gate.artifact.build_artifact`: the artifact a whole run of the set
writes, ``_meta.created`` aside (the earliest shard's), with ``_meta.shards`` (each shard merged, with its
attempt of the run) and ``_meta.retried`` (the shards a re-run made). The golden set and the baseline are
read from the checkout the merge runs in, and refused unless they are the ones the shards ran
with (the golden set's sha256, the baseline's bytes).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from pytest_ragmetrics.errors import BaselineError, InputError, RagMetricsError, brief_repr, listed
from pytest_ragmetrics.gate.artifact import ArtifactError, build_artifact, load_artifact
from pytest_ragmetrics.gate.baseline import Baseline, baseline_from_records, load_baseline, write_baseline
from pytest_ragmetrics.gate.ratchet import ratchet_base
from pytest_ragmetrics.gate.shard import shard_of
from pytest_ragmetrics.gate.staleness import label_ages
from pytest_ragmetrics.gate.thresholds import Thresholds, thresholds_from_mapping
from pytest_ragmetrics.gate.verdict import QueryRecord, RunInputs, ScopeCheck, Verdict, find_renames, judge_run
from pytest_ragmetrics.gold import GoldCheck
from pytest_ragmetrics.golden import GoldenSet, load_golden
from pytest_ragmetrics.measures import MeasureError, MeasurementConfig

__all__ = ["Shard", "Merged", "load_shards", "check_shards", "merge_shards", "refresh_baseline", "write_refreshed",
           "shown_path", "check_run", "retried_shards", "MAX_SPREAD_HOURS"]

#: ``_meta`` keys a run's artifact adds to the run's fingerprint (:func:`build_artifact`); the
#: rest is what a baseline's ``_meta`` holds too
_ARTIFACT_KEYS = ("format", "subset", "baseline", "baseline_retriever", "judgments", "seal", "run_id", "smoke",
                  "attempt")
#: ``_meta`` keys of a run's artifact that a baseline does not take (the run's identity, its subset)
_RUN_KEYS = ("run_id", "smoke")
#: how far apart (hours) the shards of one run may have run when none records a run id
MAX_SPREAD_HOURS = 6.0
#: ``_meta`` keys that differ between shards of one run (a re-run shard's attempt is higher)
_PER_SHARD = ("created", "seal", "attempt")


@dataclass
class Shard:
    """One shard's artifact, checked by the artifact schema."""

    path: str
    data: dict[str, Any]

    @property
    def section(self) -> dict[str, Any]:
        return self.data["shard"]

    @property
    def spec(self) -> str:
        return f"{self.section['index']}/{self.section['count']}"

    @property
    def attempt(self) -> int | None:
        """Which attempt of the run made this shard (``_meta.attempt``, 1 for the first); None: not recorded."""
        value = self.data["_meta"].get("attempt")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def entry(self) -> dict[str, Any]:
        """This shard as the merged artifact's ``_meta.shards`` lists it."""
        return {"index": self.section["index"], "count": self.section["count"], "attempt": self.attempt,
                "file": self.path}


@dataclass
class Merged:
    """The merged run: its verdict, its artifact (unsealed) and what the reports and a refresh need."""

    shards: list[Shard]
    #: the ``_meta`` the shards share (:func:`reference`'s), as recorded
    recorded: dict[str, Any]
    #: the merged run's fingerprint, as a baseline's ``_meta`` holds it
    meta: dict[str, Any]
    golden: GoldenSet  # the queries meant to run: every shard's together
    full_golden: GoldenSet
    records: dict[str, QueryRecord]
    baseline: Baseline | None
    baseline_path: Path
    thresholds: Thresholds
    metrics: list[str]
    verdict: Verdict
    artifact: dict[str, Any]
    gold_check: GoldCheck | None
    gold_unchecked: str | None
    created: str
    #: what the baseline was measured differently in, compared anyway (--rag-accept-mismatch)
    mismatch: list[str] = dataclasses.field(default_factory=list)


def load_shards(paths: Sequence[str | Path]) -> list[Shard]:
    """Each path's artifact, refused unless it is a shard's (it has a ``shard`` section)."""
    shards = []
    for path in paths:
        data = load_artifact(path)
        if "shard" not in data:
            raise ArtifactError(str(path), "shard", "is missing: not a shard's artifact (`pytest --rag-eval "
                                                    "--rag-shard I/N --rag-report=PATH` writes one); a whole "
                                                    "run's artifact needs no merging")
        shards.append(Shard(str(path), data))
    return shards


def _differences(a: Any, b: Any, where: str) -> list[str]:
    """The paths (``_meta.golden.sha256``) at which two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(set(a) | set(b), key=str)
                for d in (_differences(a.get(key), b.get(key), f"{where}.{key}") if key in a and key in b
                          else [f"{where}.{key}"])]
    return [] if a == b else [where]


def _value_at(data: Any, where: str) -> Any:
    for key in where.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def reference(shards: Sequence[Shard]) -> Shard:
    """The shard whose ``_meta`` the merged run takes: the first that ran a query (one dealt none has
    no retriever description), else the first."""
    return next((s for s in shards if s.section["records"]), shards[0])


def check_run(shards: Sequence[Shard], max_spread: float = MAX_SPREAD_HOURS) -> None:
    """Refuse shards of different runs: their ``_meta.run_id`` differ (a shard killed before it wrote
    its artifact leaves an older run's file at its path); when none records one, their times lie more
    than ``max_spread`` hours apart."""
    ids = {s.path: s.data["_meta"].get("run_id") for s in shards}
    if len({str(v) for v in ids.values()}) > 1:
        shown = "; ".join(f"{path}: {brief_repr(v) if v is not None else 'none'}" for path, v in ids.items())
        raise RagMetricsError(f"the shards come from different runs (_meta.run_id: {shown}); merge the shards of "
                              "one run only: a shard whose job failed before writing its artifact leaves an older "
                              "run's file behind")
    if any(v is not None for v in ids.values()):
        return
    times: list[tuple[_dt.datetime, Shard]] = []
    for shard in shards:
        try:
            times.append((_dt.datetime.fromisoformat(str(shard.data["_meta"].get("created"))), shard))
        except ValueError:
            continue
    if len(times) < 2:
        return
    (early, first), (late, last) = min(times, key=lambda t: t[0]), max(times, key=lambda t: t[0])
    hours = (late - early).total_seconds() / 3600
    if hours > max_spread:
        raise RagMetricsError(
            f"the shards ran {hours:.1f} hours apart ({first.path} at {early.isoformat()}, {last.path} at "
            f"{late.isoformat()}), more than --max-spread {max_spread:g}: they may not be one run (a shard whose job "
            "failed before writing its artifact leaves an older run's file behind). Give the shards of one run a "
            "run id (`pytest --rag-run-id ID`, taken from the CI's run variables when it runs in one), or pass "
            "--max-spread HOURS when they did run that far apart")


def check_shards(shards: Sequence[Shard], max_spread: float = MAX_SPREAD_HOURS) -> None:
    """Refuse shards that are not the N shards of one run, each once (naming the files and the field)."""
    if not shards:
        raise RagMetricsError("no shard given: pass every shard's artifact (shard*.json)")
    check_run(shards, max_spread)
    first = reference(shards)

    def fingerprint(shard: Shard, described: bool) -> dict[str, Any]:
        meta = {k: v for k, v in shard.data["_meta"].items() if k not in _PER_SHARD}
        if not described:  # a shard dealt no query never met the retriever, so it has no description
            meta.pop("retriever", None)
        return {"_meta": meta, "shard": {k: shard.section.get(k) for k in ("count", "of", "baseline")}}

    for shard in shards:
        described = bool(shard.section["records"])
        a, b = fingerprint(first, described), fingerprint(shard, described)
        differ = [d.lstrip(".") for d in _differences(a, b, "")]
        if differ:
            what = "; ".join(f"{d}: {brief_repr(_value_at(a, d))} in {first.path}, "
                             f"{brief_repr(_value_at(b, d))} in {shard.path}" for d in differ[:3])
            golden = any(d.startswith("_meta.golden") for d in differ)
            raise InputError(shard.path, None, f"is not a shard of the same run as {first.path}"
                             + (" (they ran different golden sets)" if golden else "")
                             + f": {what}{' …' if len(differ) > 3 else ''}; merge the shards of one run only")
    count = first.section["count"]
    seen: dict[int, Shard] = {}
    for shard in shards:
        index = shard.section["index"]
        if index in seen and seen[index].attempt != shard.attempt:
            raise RagMetricsError(_two_attempts(seen[index], shard))
        if index in seen:
            raise InputError(shard.path, "shard.index", f"is {index}: shard {shard.spec} is given twice (also as "
                                                        f"{seen[index].path}); pass each shard once")
        seen[index] = shard
    missing = [i for i in range(1, count + 1) if i not in seen]
    if missing:
        given = listed([f"{s.spec} {s.path}" for s in sorted(shards, key=lambda s: s.section["index"])])
        raise RagMetricsError(f"shard{'s' if len(missing) > 1 else ''} "
                              f"{listed([f'{i}/{count}' for i in missing])} "
                              f"{'are' if len(missing) > 1 else 'is'} missing (given: {given}); pass every "
                              f"shard's artifact, so that the {first.section['of']} queries are judged together")
    dealt: dict[str, Shard] = {}
    for shard in shards:
        for qid in shard.section["queries"]:
            if qid in dealt:
                raise InputError(shard.path, f"shard.queries.{qid}", f"was dealt to shard {dealt[qid].spec} too "
                                                                     f"({dealt[qid].path}): the shards overlap")
            dealt[qid] = shard
    if len(dealt) != first.section["of"]:
        raise InputError(first.path, "shard.of", f"is {first.section['of']}, but the shards were dealt {len(dealt)} "
                                                 "queries together: they do not cover the set exactly once")


def _two_attempts(a: Shard, b: Shard) -> str:
    """Why the same shard from two attempts of the run cannot be merged, naming both files."""
    def attempt(shard: Shard) -> str:
        return f"attempt {shard.attempt}" if shard.attempt is not None else "attempt not recorded"

    latest = max((a, b), key=lambda s: s.attempt or 0) if a.attempt is not None and b.attempt is not None else None
    return (f"shard {b.spec} is given twice, from two attempts of the run: {a.path} ({attempt(a)}) and {b.path} "
            f"({attempt(b)}); give only the latest attempt of each shard"
            + (f" (here {latest.path})" if latest is not None else "")
            + ": merging both would judge its queries twice, and an earlier attempt is not this run's verdict")


def retried_shards(shards: Sequence[Shard]) -> list[Shard]:
    """The shards a re-run made (attempt above 1): a shard re-run until it passes can hide a flaky
    regression that failed its earlier attempt, so the merge names them."""
    return [s for s in shards if s.attempt is not None and s.attempt > 1]


def _resolved(path: str | Path) -> Path:
    """A recorded project path, from the directory the merge runs in (an absolute path as it is)."""
    return Path(path).absolute()


def _golden(shards: Sequence[Shard], meta: dict[str, Any], golden_path: str | Path | None,
            config: MeasurementConfig) -> tuple[GoldenSet, GoldenSet]:
    """The whole golden set the shards ran (checked by its sha256) and the part every shard together ran."""
    recorded: dict[str, Any] = meta["golden"] if isinstance(meta.get("golden"), dict) else {}
    source = golden_path or recorded.get("source")
    first = shards[0].path
    if not source:
        raise InputError(first, "_meta.golden.source", "is missing: pass the golden set with --golden")
    path = _resolved(source)
    if not path.exists():
        raise InputError(str(source), None, f"not found: the golden set the shards ran ({first}: _meta.golden.source)"
                                            " is read from the checkout the merge runs in; run it in the "
                                            "project's folder, or pass --golden")
    full = load_golden(path, id_separator=config.id_separator)
    judgments: dict[str, Any] = meta["judgments"] if isinstance(meta.get("judgments"), dict) else {}
    if judgments.get("mode") in ("closed", "pooled") and judgments["mode"] != full.judgments:  # --rag-judgments
        full = dataclasses.replace(full, judgments=judgments["mode"], judgments_from=str(judgments.get("from") or ""))
    if recorded.get("sha256") and full.fingerprint() != recorded["sha256"]:
        commit = meta.get("git_commit")
        raise InputError(str(source), None, f"is not the golden set the shards ran: its sha256 is "
                                            f"{full.fingerprint()[:12]}…, {first} records {recorded['sha256'][:12]}… "
                                            "(_meta.golden.sha256); merge in a checkout of the commit the shards ran"
                                            + (f" ({commit})" if commit else ""))
    dealt = [q for s in shards for q in s.section["queries"]]
    unknown = [q for q in dealt if q not in full]
    if unknown:
        raise InputError(str(source), None, f"lacks queries the shards ran: {listed(unknown)}")
    golden = full.subset(dealt)
    if meta.get("subset", "full") == "full" and len(golden) != len(full):
        raise InputError(first, "shard.of", f"is {len(golden)}, but the golden set {source} holds {len(full)} queries: "
                                            "the shards do not cover it")
    placed = shard_of(golden, shards[0].section["count"])
    for shard in shards:
        wrong = [q for q in shard.section["queries"] if placed[q] != shard.section["index"]]
        if wrong:
            raise InputError(shard.path, "shard.queries", f"holds queries that shard {shard.spec} is not dealt from "
                                                          f"{source} ({listed(wrong)}): the file was edited, or the "
                                                          "golden set's tags changed since the shards ran")
    return full, golden


def _baseline(shards: Sequence[Shard], meta: dict[str, Any], baseline_path: str | Path | None,
              updating: bool) -> tuple[Baseline | None, Path]:
    """The baseline the shards were judged against, from the checkout (checked by its bytes' sha256)."""
    path = _resolved(baseline_path or shards[0].section["baseline"])
    entry = meta.get("baseline")
    if not isinstance(entry, dict):  # no baseline when the shards ran: nothing was compared
        if path.exists():
            raise InputError(str(path), None, f"exists, but the shards ran without a baseline ({shards[0].path}: "
                                              "_meta.baseline is null): it changed since the shards ran, so they "
                                              "were not judged against it and a refresh would replace it unseen; "
                                              "run the shards again, or merge in a checkout of the commit the "
                                              "shards ran")
        return None, path
    if not path.exists():
        if updating:
            return None, path
        raise InputError(str(path), None, f"not found: the baseline the shards were judged against "
                                          f"({shards[0].path}: shard.baseline) is read from the checkout the merge "
                                          "runs in; run it in the project's folder, or pass --baseline")
    if entry.get("sha256") and hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
        raise InputError(str(path), None, f"is not the baseline the shards were judged against: its sha256 differs "
                                          f"from {shards[0].path}'s _meta.baseline.sha256; merge in a checkout of "
                                          "the commit the shards ran")
    try:
        return load_baseline(path, sealed=not updating), path
    except BaselineError:
        if updating:
            return None, path
        raise


def _records(shards: Sequence[Shard]) -> dict[str, QueryRecord]:
    records: dict[str, QueryRecord] = {}
    for shard in shards:
        for qid, data in shard.section["records"].items():
            try:
                records[qid] = QueryRecord.from_dict(data)
            except (TypeError, ValueError) as exc:
                raise InputError(shard.path, f"shard.records.{qid}", f"is not a query record ({exc})") from None
    return records


def _gold(shards: Sequence[Shard]) -> tuple[GoldCheck | None, str | None]:
    gold = shards[0].section.get("gold") or {}
    for shard in shards:  # a retriever's doc_ids() is checked by each shard: take the first that did
        found = shard.section.get("gold") or {}
        if "check" in found or "unchecked" in found:
            gold = found
            break
    if isinstance(gold.get("check"), dict):
        try:
            return GoldCheck.from_dict(gold["check"]), None
        except (TypeError, ValueError, KeyError) as exc:
            raise InputError(shards[0].path, "shard.gold.check", f"is not a gold check ({exc})") from None
    return None, gold.get("unchecked") if isinstance(gold.get("unchecked"), str) else None


def shown_path(path: Path) -> str:
    """``path`` from the current folder when it is inside it (as the plugin names project paths)."""
    try:
        return path.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def merge_shards(paths: Sequence[str | Path], *, golden: str | Path | None = None,
                 baseline: str | Path | None = None, out: str | Path | None = None,
                 updating: bool = False, max_spread: float = MAX_SPREAD_HOURS,
                 baseline_ref: str | None = None) -> Merged:
    """Check the shards, then judge their records as one run; the artifact is the whole run's (unsealed).

    ``golden``/``baseline`` override the paths the shards recorded; ``out`` is where the merged
    artifact goes (named in a pooled set's judging command); ``updating``: the merge refreshes the
    baseline, so, as a ``--rag-update-baseline`` run, it compares with nothing; ``max_spread``: the
    hours shards without a run id may lie apart (:func:`check_run`); ``baseline_ref``: the git ref the
    baseline is compared with for lowerings (None: a pull request's base, when the CI says so), as the
    plugin's ``--rag-baseline-ref``.
    """
    shards = load_shards(paths)
    check_shards(shards, max_spread)
    shards.sort(key=lambda s: s.section["index"])
    meta = dict(reference(shards).data["_meta"])
    created = min(str(s.data["_meta"].get("created") or "") for s in shards) or None
    try:
        config = MeasurementConfig.from_dict(meta["measurement"])
    except (MeasureError, TypeError, ValueError, KeyError) as exc:
        raise InputError(shards[0].path, "_meta.measurement", f"is not a measurement config: {exc}") from None
    metrics = config.metric_names
    full, run_golden = _golden(shards, meta, golden, config)
    if updating and meta.get("subset", "full") != "full":
        raise RagMetricsError("--update-baseline needs the full set: the shards ran the "
                              f"{meta.get('subset')} subset")
    base, base_path = _baseline(shards, meta, baseline, updating)
    recorded = meta.get("thresholds")
    if isinstance(recorded, dict) and isinstance(recorded.get("values"), dict):
        thresholds = thresholds_from_mapping(recorded["values"], config,
                                             f"{shards[0].path}: _meta.thresholds.values")
        thresholds.path = None if recorded.get("source") in (None, "defaults") else str(recorded["source"])
    else:
        thresholds = Thresholds.defaults(config)
    records = _records(shards)
    if updating:  # a refresh compares with nothing: each record as a --rag-update-baseline run scores it
        records = {q: dataclasses.replace(r, drops=None, inconclusive=False, unjudged_new=None)
                   for q, r in records.items()}
    today = _dt.date.fromisoformat(created[:10]) if created else None
    labels = label_ages(run_golden, thresholds, today)
    compared = None if updating else base
    answer = meta.get("answer_threshold")
    # a query a shard skipped is not judged: named with its reason, as a whole run names it
    skipped = {q.qid: str(why) for s in shards for q in run_golden if q.qid not in records
               and isinstance(why := (s.data["comparison"].get("skipped") or {}).get(q.qid), str)}
    verdict = judge_run(RunInputs(
        records=records, golden=run_golden, full_golden=full, baseline=compared, baseline_path=str(base_path),
        thresholds=thresholds, metrics=tuple(metrics), relevance_level=config.relevance_level,
        reference="the baseline", labels=labels, artifact_path=shown_path(Path(out)) if out else None,
        answer_threshold=float(answer) if isinstance(answer, (int, float)) else None, lacking={},
        scope=ScopeCheck.recorded(meta, bool(full.scoped())), skipped=skipped,
        ratchet=None if compared is None else ratchet_base(Path(base_path), baseline_ref, "--baseline-ref",
                                                            shown_path(Path(base_path)))))
    gold_check, gold_unchecked = _gold(shards)
    run_meta = {k: v for k, v in meta.items() if k not in _ARTIFACT_KEYS}
    if created is not None:
        run_meta["created"] = created
    # what --rag-accept-mismatch compared despite, as each shard found it (they share the baseline)
    mismatch = list(dict.fromkeys(str(m) for s in shards for m in s.section.get("mismatch") or []))
    merged = Merged(shards, meta, run_meta, run_golden, full, records, base, base_path, thresholds, metrics, verdict,
                    {}, gold_check, gold_unchecked, created or "", mismatch)
    merged.artifact = artifact_of(merged, None if updating else meta.get("baseline"), updating)
    return merged


def artifact_of(merged: Merged, baseline_file: Any, updating: bool) -> dict[str, Any]:
    """The merged run's artifact, as :func:`build_artifact` builds a whole run's (unsealed)."""
    from pytest_ragmetrics.report.text import retriever_changes

    meta = merged.recorded
    base = None if updating else merged.baseline
    baseline_id = {new: old for old, new in find_renames(merged.full_golden, base).items()} if base else {}
    judgments: dict[str, Any] = meta["judgments"] if isinstance(meta.get("judgments"), dict) else {}
    before = meta.get("baseline_retriever")
    data = build_artifact(merged.meta, merged.verdict, merged.golden, merged.records, merged.metrics,
                          int(meta.get("k") or 10), str(meta.get("subset") or "full"), base, baseline_id,
                          baseline_file, before, retriever_changes(before, meta.get("retriever")),
                          judgments.get("from", "default"))
    data["_meta"].update({key: meta[key] for key in _RUN_KEYS if key in meta})  # as the plugin adds them
    # which shards, from which attempt of the run: a retried shard is named in every report
    data["_meta"]["shards"] = [s.entry() for s in merged.shards]
    data["_meta"]["retried"] = [s.section["index"] for s in retried_shards(merged.shards)]
    return data


def refresh_baseline(merged: Merged, allow_missing_gold: bool, reason: str | None) -> tuple[str, Baseline]:
    """The baseline the merged records make, with the plugin's refusals (:class:`BaselineError`), a
    lowering of a gated value among them unless ``reason`` says why (then kept in ``_meta.lowerings``),
    and what changed, as text; nothing is written. The artifact then names that baseline, so that
    it can be written before it (:func:`write_refreshed`): a failed write leaves the old baseline."""
    from pytest_ragmetrics.files import dumps_stable
    from pytest_ragmetrics.report.text import baseline_change_text

    new = baseline_from_records(merged.records, merged.full_golden, merged.metrics,
                                int(merged.meta.get("measurement", {}).get("relevance_level", 1)),
                                lambda: dict(merged.meta), merged.gold_check, allow_missing_gold,
                                merged.baseline_path, allow_flag="--allow-missing-gold")
    from pytest_ragmetrics.gate.gitref import author_from_git
    from pytest_ragmetrics.gate.lowering import gated_in_files, gated_metrics, refresh_lowerings

    gated = gated_metrics(merged.thresholds, merged.metrics) | (gated_in_files(merged.baseline.meta)
                                                                if merged.baseline else frozenset())
    lowerings = refresh_lowerings(merged.baseline, new, gated, reason,
                                  time=merged.created or "", path=shown_path(Path(merged.baseline_path)),
                                  author=author_from_git(Path(merged.baseline_path).parent) if reason else None,
                                  reason_flag="--reason")
    if lowerings.entries:
        new.meta["lowerings"] = lowerings.entries
    change = "\n".join([baseline_change_text(merged.baseline, new, merged.metrics), *lowerings.notes])
    text = dumps_stable(new.to_dict())
    data = json.loads(text)  # the file as it will be read back, for its content digest
    written = Baseline(data["_meta"], data["aggregate"], data["per_query"], str(merged.baseline_path), [])
    entry = {"sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
             "content": written.content_digest(), "created": merged.created, "updated": True}
    merged.artifact = artifact_of(merged, entry, updating=True)
    return change, new


def write_refreshed(merged: Merged, new: Baseline) -> None:
    """Write the baseline :func:`refresh_baseline` made (:class:`BaselineError` when it cannot be)."""
    write_baseline(merged.baseline_path, new)
