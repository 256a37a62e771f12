"""Metric names, aliases, cutoffs and the measurement configuration (pytest_ragmetrics.measures)."""

from __future__ import annotations

import json

import pytest

from pytest_ragmetrics import MEASURE_NAMES, Measure, MeasureError, MeasurementConfig, parse_measure, parse_measures


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("text", "name", "cutoff", "canonical"),
    [
        ("ndcg@10", "ndcg", 10, "ndcg@10"),
        ("recall@100", "recall", 100, "recall@100"),
        ("precision@5", "precision", 5, "precision@5"),
        ("hit_rate@3", "hit_rate", 3, "hit_rate@3"),
        ("map@100", "map", 100, "map@100"),
        ("mrr@10", "mrr", 10, "mrr@10"),
        ("mrr", "mrr", None, "mrr"),
        ("ndcg", "ndcg", None, "ndcg"),
        ("map", "map", None, "map"),
        ("recall", "recall", None, "recall"),
        # trec_eval spellings
        ("P@5", "precision", 5, "precision@5"),
        ("p@5", "precision", 5, "precision@5"),
        ("success@3", "hit_rate", 3, "hit_rate@3"),
        ("recip_rank", "mrr", None, "mrr"),
        ("ndcg_cut@7", "ndcg", 7, "ndcg@7"),
        ("map_cut@20", "map", 20, "map@20"),
        # other common spellings
        ("hitrate@1", "hit_rate", 1, "hit_rate@1"),
        ("hit@2", "hit_rate", 2, "hit_rate@2"),
        ("rr@10", "mrr", 10, "mrr@10"),
        ("R@50", "recall", 50, "recall@50"),
        ("NDCG@10", "ndcg", 10, "ndcg@10"),
        ("  ndcg @ 10 ", "ndcg", 10, "ndcg@10"),
    ],
)
def test_parse_measure_names_and_aliases(text: str, name: str, cutoff: int | None, canonical: str) -> None:
    measure = parse_measure(text)
    assert measure == Measure(name, cutoff)
    assert (measure.name, measure.cutoff) == (name, cutoff)
    assert str(measure) == canonical
    # the canonical spelling parses back to the same measure
    assert parse_measure(str(measure)) == measure


def test_parse_measure_passes_measures_through() -> None:
    m = Measure("ndcg", 10)
    assert parse_measure(m) is m


def test_registry_lists_the_metrics_with_their_trec_eval_names() -> None:
    assert set(MEASURE_NAMES) == {"recall", "hit_rate", "precision", "mrr", "ndcg", "map", "judged", "ndcg_judged"}
    assert MEASURE_NAMES["precision"] == "P_k"
    assert MEASURE_NAMES["hit_rate"] == "success_k"


def test_judged_measures_parse_with_and_without_a_cutoff() -> None:
    assert parse_measure("judged@10") == Measure("judged", 10)
    assert parse_measure("ndcg_judged@10") == Measure("ndcg_judged", 10)
    assert str(parse_measure("ndcg_judged")) == "ndcg_judged"
    # judged documents are read past the deepest cutoff only as far as ndcg_judged needs
    assert MeasurementConfig(("ndcg@10", "judged@5")).condensed_depth == 0
    assert MeasurementConfig(("ndcg_judged@5", "ndcg_judged@20")).condensed_depth == 20
    assert MeasurementConfig(("ndcg_judged@5", "ndcg_judged")).condensed_depth is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("foo@10", "unknown metric 'foo'"),
        ("ndcg10", "cannot read metric"),
        ("dcg@10", "unknown metric 'dcg'"),
        ("f1@5", "cannot read metric"),
        ("ndcg@0", "positive integer"),
        ("ndcg@-1", "positive integer"),
        ("ndcg@1.5", "positive integer"),
        ("ndcg@ten", "positive integer"),
        ("ndcg@10@3", "positive integer"),
        ("ndcg@²", "positive integer"),  # str.isdigit() is True here but int() fails
        ("ndcg@", "cannot read metric"),
        ("@10", "cannot read metric"),
        ("", "cannot read metric"),
        ("precision", "precision needs a cutoff"),
        ("P", "precision needs a cutoff"),
    ],
)
def test_bad_names_and_cutoffs_raise_a_clear_measure_error(text: str, fragment: str) -> None:
    with pytest.raises(MeasureError) as info:
        parse_measure(text)
    assert fragment in str(info.value)
    if "unknown metric" in fragment:
        # the message lists what is known, so the user can fix the typo
        assert "ndcg" in str(info.value) and "recall" in str(info.value)


@pytest.mark.parametrize("value", [None, 10, 1.5, ["ndcg@10"]])
def test_parse_measure_rejects_non_strings(value: object) -> None:
    with pytest.raises(MeasureError, match="must be a string"):
        parse_measure(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "cutoff", "fragment"),
    [
        ("bogus", 10, "unknown metric"),
        ("ndcg", 0, "positive integer"),
        ("ndcg", -3, "positive integer"),
        ("ndcg", 2.0, "positive integer"),
        ("ndcg", True, "positive integer"),
        ("ndcg", "10", "positive integer"),
        ("precision", None, "needs a cutoff"),
    ],
)
def test_measure_constructor_validates(name: str, cutoff: object, fragment: str) -> None:
    with pytest.raises(MeasureError, match=fragment):
        Measure(name, cutoff)  # type: ignore[arg-type]


def test_measures_sort_with_the_whole_ranking_after_every_cutoff() -> None:
    """A measure without a cutoff used to compare None with an int (TypeError)."""
    import pytest_ragmetrics

    M = pytest_ragmetrics.Measure
    mixed = [M("mrr"), M("recall", 100), M("mrr", 10), M("mrr", 5), M("hit_rate", 3), M("mrr", 10)]
    assert [str(m) for m in sorted(mixed)] == ["hit_rate@3", "mrr@5", "mrr@10", "mrr@10", "mrr", "recall@100"]
    assert M("mrr", 10) < M("mrr") and M("mrr") > M("mrr", 10_000) and M("mrr") <= M("mrr")
    assert max([M("ndcg", 10), M("ndcg")]) == M("ndcg")
    with pytest.raises(TypeError):
        M("mrr") < "mrr"  # noqa: B015 - only measures compare


def test_parse_measures_keeps_order_splits_and_drops_repeats() -> None:
    got = parse_measures(["ndcg@10", "recall@100, mrr@10", "NDCG@10", "P@5 success@3", Measure("ndcg", 10)])
    assert [str(m) for m in got] == ["ndcg@10", "recall@100", "mrr@10", "precision@5", "hit_rate@3"]
    assert parse_measures("ndcg@10,recall@5") == (Measure("ndcg", 10), Measure("recall", 5))


@pytest.mark.parametrize("texts", [[], [""], [" , "], ""])
def test_parse_measures_needs_at_least_one(texts: object) -> None:
    with pytest.raises(MeasureError, match="no metrics given"):
        parse_measures(texts)  # type: ignore[arg-type]


def test_parse_measures_reports_the_bad_one() -> None:
    with pytest.raises(MeasureError, match="'nDCGG'"):
        parse_measures(["ndcg@10", "nDCGG@10"])


# ---------------------------------------------------------------- measurement config


def test_default_config() -> None:
    config = MeasurementConfig()
    assert config.metric_names == ["recall@10", "hit_rate@10", "mrr@10", "ndcg@10"]
    assert config.relevance_level == 1
    assert config.gain == "exponential"
    assert config.id_separator == "#"
    assert config.depth == 10


def test_config_parses_measure_strings() -> None:
    config = MeasurementConfig(measures=("P@5", "ndcg@10", "P@5"))
    assert config.measures == (Measure("precision", 5), Measure("ndcg", 10))
    assert config.metric_names == ["precision@5", "ndcg@10"]


@pytest.mark.parametrize(
    ("measures", "depth"),
    [
        (("ndcg@10",), 10),
        (("ndcg@10", "recall@100", "P@5"), 100),
        (("ndcg@10", "mrr"), None),  # an uncut measure looks at the whole ranking
        (("map",), None),
    ],
)
def test_depth_is_the_deepest_cutoff(measures: tuple[str, ...], depth: int | None) -> None:
    assert MeasurementConfig(measures=measures).depth == depth


@pytest.mark.parametrize("level", [0, -1, True, 1.0, "2", None])
def test_config_rejects_bad_relevance_level(level: object) -> None:
    with pytest.raises(MeasureError, match="relevance level must be an integer >= 1"):
        MeasurementConfig(relevance_level=level)


@pytest.mark.parametrize("gain", ["exp", "Linear", "log", "", None])
def test_config_rejects_bad_gain(gain: object) -> None:
    with pytest.raises(MeasureError, match="gain must be one of exponential, linear"):
        MeasurementConfig(gain=gain)


def test_config_rejects_bad_measure() -> None:
    with pytest.raises(MeasureError, match="unknown metric"):
        MeasurementConfig(measures=("ndcg@10", "ncdg@10"))


def test_empty_separator_means_no_mapping() -> None:
    assert MeasurementConfig(id_separator="").id_separator is None
    assert MeasurementConfig(id_separator=None).id_separator is None
    assert MeasurementConfig(id_separator="::").id_separator == "::"


def test_to_dict_is_the_recorded_form() -> None:
    config = MeasurementConfig(measures=("ndcg@10", "recall@100"), relevance_level=2, gain="linear", id_separator="::")
    assert config.to_dict() == {
        "metrics": ["ndcg@10", "recall@100"],
        "relevance_level": 2,
        "gain": "linear",
        "id_separator": "::",
        "dedup": "first",
    }


@pytest.mark.parametrize(
    "config",
    [
        MeasurementConfig(),
        MeasurementConfig(measures=("P@5", "mrr", "map@100"), relevance_level=3, gain="linear", id_separator=None),
        MeasurementConfig(measures=("success@1",), id_separator="|"),
    ],
)
def test_to_dict_from_dict_round_trip_through_json(config: MeasurementConfig) -> None:
    data = json.loads(json.dumps(config.to_dict()))
    again = MeasurementConfig.from_dict(data)
    assert again == config
    assert again.to_dict() == config.to_dict()


def test_from_dict_validates() -> None:
    with pytest.raises(MeasureError):
        MeasurementConfig.from_dict({"metrics": ["ndcg@10"], "gain": "cubic"})
    with pytest.raises(MeasureError):
        MeasurementConfig.from_dict({"metrics": ["ndcg@0"]})


def test_config_is_hashable_and_frozen() -> None:
    config = MeasurementConfig()
    assert hash(config) == hash(MeasurementConfig())
    with pytest.raises(AttributeError):
        config.gain = "linear"  # type: ignore[misc]
