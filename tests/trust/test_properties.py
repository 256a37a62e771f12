"""Properties, checked by hypothesis over generated rankings, judgments and files.

1. Every metric lies in [0, 1], whatever the ranking (duplicates, chunk ids, unjudged
   documents), judgments, cutoffs, relevance level and gain.
2. recall@k, hit_rate@k, mrr@k and map@k never decrease as k grows.
3. The order of judgments does not matter: per query (dict order), per file (qrels
   line order), per run (query order, exactly, thanks to fsum).
4. Duplicate ids never raise a score: repeating results (or returning more chunks of
   a document already seen) scores exactly what the deduplicated ranking scores.
5. Every loader, given random bytes or random near-valid text, returns a result or
   raises the package's own error type (InputError for data files, BaselineError and
   ThresholdsError for the baseline files), and nothing else.
6. The verdict and every report (text, Markdown, strict JSON, HTML) come out for any
   mix of record statuses, baselines and thresholds; an errored query is a regression;
   describing a baseline change never fails, whatever the old and new baselines hold.

The examples are derandomized (the same on every run and in CI) and the example
database is off, so the suite is reproducible; to search harder locally, raise
``RAGMETRICS_HYPOTHESIS_EXAMPLES`` and set ``RAGMETRICS_HYPOTHESIS_RANDOM=1``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragmetrics.files import dumps_stable
from pytest_ragmetrics.gate.baseline import Baseline, load_baseline
from pytest_ragmetrics.gate.thresholds import Thresholds, load_thresholds
from pytest_ragmetrics.errors import BaselineError, InputError, ThresholdsError
from pytest_ragmetrics.evaluation import evaluate, score_query
from pytest_ragmetrics.gate.verdict import Drop, QueryRecord
from verdicts import judge
from pytest_ragmetrics.golden import GoldenSet, Query, load_golden, load_qrels
from pytest_ragmetrics.measures import _NEEDS_CUTOFF, MEASURE_NAMES, MeasurementConfig
from pytest_ragmetrics.metrics import document_ranking
from pytest_ragmetrics.report.html import render_html
from pytest_ragmetrics.report.markdown import verdict_markdown
from pytest_ragmetrics.report.text import verdict_text
from pytest_ragmetrics.report.text import baseline_change_text as describe_change
from pytest_ragmetrics.trec import read_run

EXAMPLES = int(os.environ.get("RAGMETRICS_HYPOTHESIS_EXAMPLES", "150"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    derandomize=not os.environ.get("RAGMETRICS_HYPOTHESIS_RANDOM"),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

DOCS = [f"d{i}" for i in range(12)]
#: ranked ids: documents, chunks of them (``d3#2``), and documents nobody judged
RANKED_IDS = st.sampled_from(DOCS + [f"{d}#{j}" for d in DOCS[:6] for j in range(1, 4)] + ["u1", "u2", "u3"])
RANKINGS = st.lists(RANKED_IDS, max_size=60)
JUDGMENTS = st.dictionaries(st.sampled_from(DOCS), st.integers(0, 6), min_size=1, max_size=12)
CUTOFF_METRICS = ["recall", "hit_rate", "precision", "mrr", "ndcg", "map", "judged", "ndcg_judged"]


@st.composite
def configs(draw: st.DrawFn) -> MeasurementConfig:
    names = draw(st.lists(st.sampled_from(CUTOFF_METRICS), min_size=1, max_size=8, unique=True))
    measures = [f"{n}@{draw(st.integers(1, 50))}" for n in names]
    uncut = [n for n in CUTOFF_METRICS if n not in _NEEDS_CUTOFF]
    measures += [n for n in draw(st.lists(st.sampled_from(uncut), max_size=2, unique=True))]
    return MeasurementConfig(measures=tuple(dict.fromkeys(measures)),
                             relevance_level=draw(st.integers(1, 4)),
                             gain=draw(st.sampled_from(["linear", "exponential"])))


# ------------------------------------------------------------------- 1. in [0, 1]


@PROPERTY
@given(ranking=RANKINGS, judgments=JUDGMENTS, config=configs())
def test_every_metric_lies_in_zero_one(ranking: list[str], judgments: dict[str, int],
                                       config: MeasurementConfig) -> None:
    docs, metrics = score_query(ranking, judgments, config)
    assert len(docs) == len(set(docs))
    if metrics is None:
        assert not any(g >= config.relevance_level for g in judgments.values())
        return
    assert set(metrics) == set(config.metric_names)
    for name, value in metrics.items():
        assert 0.0 <= value <= 1.0, (name, value)


@PROPERTY
@given(judgments=JUDGMENTS, level=st.integers(1, 4), gain=st.sampled_from(["linear", "exponential"]),
       k=st.integers(1, 20))
def test_the_ideal_ranking_scores_exactly_one(judgments: dict[str, int], level: int, gain: str, k: int) -> None:
    if not any(g >= level for g in judgments.values()):
        return
    ideal = sorted(judgments, key=lambda d: -judgments[d])
    config = MeasurementConfig(measures=(f"ndcg@{k}", "ndcg", f"hit_rate@{k}", "mrr"),
                               relevance_level=level, gain=gain)
    _, metrics = score_query(ideal, judgments, config)
    assert metrics == {f"ndcg@{k}": 1.0, "ndcg": 1.0, f"hit_rate@{k}": 1.0, "mrr": 1.0}


# --------------------------------------------------------- 2. monotone in the cutoff


@PROPERTY
@given(ranking=RANKINGS, judgments=JUDGMENTS, level=st.integers(1, 4),
       cutoffs=st.lists(st.integers(1, 70), min_size=2, max_size=8, unique=True))
def test_recall_hit_rate_mrr_and_map_never_decrease_as_k_grows(ranking: list[str], judgments: dict[str, int],
                                                               level: int, cutoffs: list[int]) -> None:
    cutoffs.sort()
    names = ["recall", "hit_rate", "mrr", "map"]
    config = MeasurementConfig(measures=tuple(f"{n}@{k}" for n in names for k in cutoffs),
                               relevance_level=level)
    _, metrics = score_query(ranking, judgments, config)
    if metrics is None:
        return
    for name in names:
        values = [metrics[f"{name}@{k}"] for k in cutoffs]
        assert values == sorted(values), (name, cutoffs, values)
    # past the end of the ranking nothing changes any more
    depth = len(document_ranking(ranking))
    beyond = [k for k in cutoffs if k >= depth]
    for name in names:
        assert len({metrics[f"{name}@{k}"] for k in beyond}) <= 1


# ----------------------------------------------------------- 3. order does not matter


@PROPERTY
@given(ranking=RANKINGS, judgments=JUDGMENTS, config=configs(), seed=st.integers(0, 2**32 - 1))
def test_the_order_of_judgments_does_not_matter(ranking: list[str], judgments: dict[str, int],
                                                config: MeasurementConfig, seed: int) -> None:
    items = list(judgments.items())
    random.Random(seed).shuffle(items)
    assert score_query(ranking, dict(items), config) == score_query(ranking, judgments, config)


@PROPERTY
@given(qrels=st.dictionaries(st.sampled_from([f"q{i}" for i in range(8)]), JUDGMENTS, min_size=1, max_size=8),
       runs=st.lists(RANKINGS, min_size=8, max_size=8), config=configs(), seed=st.integers(0, 2**32 - 1))
def test_qrels_line_order_and_query_order_do_not_matter(qrels: dict[str, dict[str, int]], runs: list[list[str]],
                                                        config: MeasurementConfig, seed: int) -> None:
    run = {f"q{i}": ranking for i, ranking in enumerate(runs)}
    lines = [f"{qid} 0 {doc} {grade}\n" for qid, judged in qrels.items() for doc, grade in judged.items()]
    shuffled = list(lines)
    random.Random(seed).shuffle(shuffled)
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp, "a.qrels"), Path(tmp, "b.qrels")
        a.write_text("".join(lines))
        b.write_text("".join(shuffled))
        first, second = evaluate(run, load_qrels(a), config), evaluate(run, load_qrels(b), config)
    assert first.per_query == second.per_query
    assert first.aggregate == second.aggregate  # bit for bit, whatever the query order
    assert sorted(first.unscorable) == sorted(second.unscorable)


# ---------------------------------------------------- 4. duplicates never raise a score


@st.composite
def rankings_with_repeats(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """A ranking of distinct documents, and the same ranking with repeats slipped in after
    each document's first appearance: the same id again, or another chunk of it."""
    base = draw(st.lists(st.sampled_from(DOCS + ["u1", "u2", "u3"]), unique=True, max_size=15))
    noisy = list(base)
    for _ in range(draw(st.integers(0, 25))):
        if not base:
            break
        doc = draw(st.sampled_from(base))
        first = noisy.index(doc) if doc in noisy else None
        if first is None:
            continue
        position = draw(st.integers(first + 1, len(noisy)))
        noisy.insert(position, draw(st.sampled_from([doc, f"{doc}#{draw(st.integers(1, 9))}"])))
    if draw(st.booleans()) and noisy:  # the first occurrence itself may be a chunk
        noisy[0] = f"{noisy[0]}#1"
    return base, noisy


@PROPERTY
@given(pair=rankings_with_repeats(), judgments=JUDGMENTS, config=configs())
def test_duplicate_ids_never_raise_a_score(pair: tuple[list[str], list[str]], judgments: dict[str, int],
                                           config: MeasurementConfig) -> None:
    base, noisy = pair
    docs, with_repeats = score_query(noisy, judgments, config)
    assert docs == base
    assert with_repeats == score_query(base, judgments, config)[1]


# ------------------------------------------------ 5. loaders: own error type or nothing

BYTES = st.binary(max_size=3000)
YAML_TOKENS = st.sampled_from(["- ", "id: ", "question: ", "gold_chunks: ", "tags: ", "q1", "q2", "doc-a", "doc-b",
                               "[", "]", "{", "}", ", ", ": ", "\n", "  ", "&a ", "*a", "!!python/name:os.system ",
                               "!!str ", "!!binary ", "'", '"', "#", "~", "null", "1", "-1", "2.5", "yes", "<<: ",
                               "\t", "\x00", "\ufeff", "é", "---\n", "...\n", "? ", "|\n", ">\n", "9" * 5000])
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-3, 2000) | st.floats(allow_nan=True)
                           | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                               st.sampled_from(["qid", "query", "candidates", "doc_id", "rel", "mode", "tags", "_id",
                                                "text", "x"]), inner, max_size=5), max_leaves=25)
TREC_TOKENS = st.sampled_from(["q1", "q2", "Q0", "0", "d1", "d2", "1", "2", "-1", "0.5", "nan", "inf", "1e999",
                               "x", " ", "\t", "\n", "\r\n", "\x00", "\ufeff", "é"])


def _text(tokens: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return st.lists(tokens, max_size=60).map(lambda parts: "".join(parts).encode("utf-8", "surrogatepass"))


def _jsonl() -> st.SearchStrategy[bytes]:
    return st.lists(JSON_VALUES.map(lambda v: json.dumps(v, allow_nan=True)), max_size=6).map(
        lambda lines: "\n".join(lines).encode())


def _own_error_only(path: Path, content: bytes, load, allowed: type[Exception]) -> None:  # type: ignore[no-untyped-def]
    path.write_bytes(content)
    try:
        load(path)
    except allowed as exc:
        assert str(exc) and str(path.name) in str(exc)
        assert len(str(exc)) < 1500


@PROPERTY
@given(content=BYTES | _text(YAML_TOKENS))
def test_the_yaml_loader_raises_only_input_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _own_error_only(Path(tmp, "golden.yaml"), content, load_golden, InputError)


@PROPERTY
@given(content=BYTES | _jsonl())
def test_the_jsonl_loader_raises_only_input_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _own_error_only(Path(tmp, "golden.jsonl"), content, load_golden, InputError)


@PROPERTY
@given(queries=BYTES | _jsonl(), qrels=BYTES | _text(TREC_TOKENS))
def test_the_folder_loader_raises_only_input_error(queries: bytes, qrels: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "queries.jsonl").write_bytes(queries)
        Path(tmp, "qrels.tsv").write_bytes(qrels)
        try:
            golden = load_golden(tmp)
        except InputError as exc:
            assert str(exc)
        else:
            assert isinstance(golden, GoldenSet) and len(golden) > 0


@PROPERTY
@given(content=BYTES | _text(TREC_TOKENS))
def test_the_qrels_loader_raises_only_input_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _own_error_only(Path(tmp, "qrels.tsv"), content, load_qrels, InputError)


@PROPERTY
@given(content=BYTES | _text(TREC_TOKENS))
def test_the_run_reader_raises_only_input_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _own_error_only(Path(tmp, "run.txt"), content, read_run, InputError)


BASELINE_JSON = st.fixed_dictionaries({
    "_meta": JSON_VALUES, "aggregate": st.dictionaries(st.sampled_from(["recall@10", "mrr@10"]), JSON_VALUES),
    "per_query": st.dictionaries(st.sampled_from(["q1", "q2"]), JSON_VALUES),
}).map(lambda d: json.dumps(d, allow_nan=True).encode())


@PROPERTY
@given(content=BYTES | BASELINE_JSON | JSON_VALUES.map(lambda v: json.dumps(v, allow_nan=True).encode()))
def test_the_baseline_loader_raises_only_baseline_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _own_error_only(Path(tmp, "baseline.json"), content, load_baseline, BaselineError)


THRESHOLDS_JSON = st.dictionaries(
    st.sampled_from(["recall@10_tolerance", "mrr@10_min", "ndcg@10_query_tolerance", "worst_n",
                     "max_regressed_queries", "fail_on_regression", "_comment", "recall@5_min", "bogus"]),
    JSON_VALUES).map(lambda d: json.dumps(d, allow_nan=True).encode())


@PROPERTY
@given(content=BYTES | THRESHOLDS_JSON)
def test_the_thresholds_loader_raises_only_thresholds_error(content: bytes) -> None:
    config = MeasurementConfig()
    with tempfile.TemporaryDirectory() as tmp:
        _own_error_only(Path(tmp, "thresholds.json"), content, lambda p: load_thresholds(p, config), ThresholdsError)


# ------------------------------------- 6. the verdict and every report never crash

METRICS = ["recall@5", "hit_rate@5", "mrr@5", "ndcg@5"]
UNIT = st.floats(0.0, 1.0)


@st.composite
def verdict_inputs(draw: st.DrawFn) -> tuple:  # type: ignore[type-arg]
    n = draw(st.integers(1, 8))
    tags = st.lists(st.sampled_from(["standard", "hard", "a|b", "<script>x</script>", "two\nlines"]), max_size=2,
                    unique=True)
    queries = []
    for i in range(n):
        judged = draw(st.dictionaries(st.sampled_from(DOCS[:5]), st.integers(0, 3), min_size=1, max_size=4))
        queries.append(Query(f"q{i}", draw(st.text(max_size=30)) or "?", judged, tuple(draw(tags))))
    golden = GoldenSet("golden.yaml", tuple(queries))
    records = {}
    for q in queries:
        status = draw(st.sampled_from(["scored", "error", "unscorable", "missing"]))
        if status == "missing":
            continue
        metrics = {m: draw(UNIT) for m in METRICS} if status == "scored" else None
        ranking = draw(st.lists(st.sampled_from(DOCS), unique=True, max_size=6))
        records[q.qid] = QueryRecord(q.qid, status, metrics, ranking, [], len(ranking),
                                     error="RuntimeError: boom" if status == "error" else None)
    baseline = None
    if draw(st.booleans()):
        known = draw(st.lists(st.sampled_from([q.qid for q in queries] + ["gone-1", "gone-2"]), unique=True))
        per_query = {qid: {**{m: draw(UNIT) for m in draw(st.lists(st.sampled_from(METRICS), unique=True))},
                           "_judgments": "0" * 16} for qid in known}
        baseline = Baseline({}, {m: draw(UNIT) for m in METRICS}, per_query, "baseline.json")
    some = st.dictionaries(st.sampled_from(METRICS), st.floats(0.0, 0.5), max_size=3)
    thresholds = Thresholds(tolerance=draw(some), minimum=draw(some), query_tolerance=draw(some),
                            max_regressed_queries=draw(st.none() | st.integers(0, 3)),
                            worst_n=draw(st.integers(0, 5)), fail_on_regression=draw(st.booleans()))
    return golden, records, baseline, thresholds


SCORES = st.none() | st.floats(allow_nan=False)
LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
#: metadata as a retriever may return it: nested lists and mappings
METADATA = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                       max_size=3), max_leaves=8)


@st.composite
def full_records(draw: st.DrawFn) -> QueryRecord:
    """A query record with every field drawn, drops and leaks included."""
    metric_map = st.dictionaries(st.sampled_from(METRICS), UNIT, max_size=4)
    optional_map = st.none() | metric_map
    drops = st.lists(st.builds(Drop, st.sampled_from(METRICS), UNIT, UNIT, st.none() | UNIT, st.booleans()),
                     max_size=3)
    leak = st.fixed_dictionaries({"rank": st.integers(1, 10), "id": st.text(max_size=4), "doc": st.text(max_size=4),
                                  "metadata": st.dictionaries(st.text(max_size=3), METADATA, max_size=3)})
    ranking = draw(st.lists(RANKED_IDS, max_size=6))
    return QueryRecord(
        draw(st.text(max_size=5)), draw(st.sampled_from(["scored", "unscorable", "error", "unanswerable"])),
        draw(optional_map), ranking, draw(st.lists(st.none() | st.text(max_size=5), max_size=6)), len(ranking),
        draw(st.none() | st.text(max_size=5)), draw(st.none() | st.integers(0, 100)),
        draw(st.none() | st.dictionaries(st.sampled_from(METRICS), metric_map, max_size=2)),
        draw(st.none() | UNIT), draw(st.lists(st.sampled_from(DOCS), max_size=3)),
        draw(st.none() | st.lists(st.sampled_from(DOCS), max_size=3)), draw(optional_map), draw(optional_map),
        draw(optional_map), draw(optional_map), draw(st.lists(SCORES, max_size=6)), draw(st.none() | st.integers(0, 1)),
        draw(st.none() | drops), draw(st.booleans()), draw(st.lists(leak, max_size=2)))


@PROPERTY
@given(record=full_records())
def test_a_record_as_plain_data_is_what_asdict_gives_and_shares_no_container(record: QueryRecord) -> None:
    """What a worker sends for each query: equal to ``dataclasses.asdict``, and nothing in it can
    change when the record does (or the other way round); it reads back as the same record."""
    plain = record.to_dict()
    assert plain == asdict(record)
    assert list(plain) == [f.name for f in fields(QueryRecord)]

    def containers(value: object) -> list[int]:
        if isinstance(value, dict):
            return [id(value), *(i for v in value.values() for i in containers(v))]
        if isinstance(value, list):
            return [id(value), *(i for v in value for i in containers(v))]
        return []

    mine = {i for f in fields(QueryRecord) for i in containers(getattr(record, f.name))}
    assert mine.isdisjoint(containers(plain))
    assert all(type(d) is dict for d in plain["drops"] or ())
    assert QueryRecord.from_dict(json.loads(json.dumps(plain))) == record


@PROPERTY
@given(inputs=verdict_inputs())
def test_the_verdict_and_every_report_never_crash(inputs: tuple) -> None:  # type: ignore[type-arg]
    """Any mix of scored, errored, unscorable and missing queries, against any baseline
    (or none) and thresholds: the verdict, the terminal text, the Markdown, the JSON (strict:
    no NaN) and the HTML all come out, and an errored query is always a regression."""
    golden, records, baseline, thresholds = inputs
    verdict = judge(records, golden, baseline, thresholds, METRICS, 1, golden)
    assert verdict_text(verdict, thresholds.worst_n)
    assert verdict_markdown(verdict, thresholds.worst_n)  # the job-summary Markdown
    per_query = {qid: {"status": r.status, "metrics": r.metrics, "ranking": r.ranking, "tags": list(golden[qid].tags),
                       "error": r.error, "n_docs": r.n_docs} for qid, r in records.items()}
    artifact = {"_meta": {"golden": {"source": "golden.yaml", "n_queries": len(golden)},
                          "measurement": {"metrics": METRICS}, "k": 5, "created": "now", "worst_n": 3},
                "aggregate": {row.metric: row.now for row in verdict.aggregate}, "n": verdict.n,
                "per_query": per_query, "comparison": verdict.to_dict()}
    json.loads(dumps_stable(artifact))  # allow_nan=False: a NaN anywhere would raise
    assert "<script>" not in render_html(artifact)
    if baseline is not None:
        assert set(verdict.errored) <= {r.qid for r in verdict.regressions}
        if verdict.errored and thresholds.max_regressed_queries is not None \
                and len(verdict.errored) > thresholds.max_regressed_queries:
            assert not next(g for g in verdict.gates if g.name == "regressed-queries").passed


BASELINES = st.builds(
    lambda agg, pq: Baseline({}, agg, pq, "baseline.json"),
    st.dictionaries(st.sampled_from(METRICS), UNIT),
    st.dictionaries(st.sampled_from([f"q{i}" for i in range(6)]), st.dictionaries(st.sampled_from(METRICS), UNIT)),
)


@PROPERTY
@given(old=st.none() | BASELINES, new=BASELINES)
def test_describing_a_baseline_change_never_crashes(old: Baseline | None, new: Baseline) -> None:
    text = describe_change(old, new, METRICS)
    assert text.startswith("Baseline written: baseline.json")


def test_the_registry_is_covered() -> None:
    """The generated configs draw from every registered metric."""
    assert set(CUTOFF_METRICS) == set(MEASURE_NAMES)
