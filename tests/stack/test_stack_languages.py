"""Scripts of texts and the languages of encoders (pytest_ragmetrics.stack.languages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragmetrics.stack.embed import default_model_path
from pytest_ragmetrics.stack.languages import (
    ALL_SCRIPTS,
    card_languages,
    coverage,
    dominant_script,
    scripts_of_languages,
)


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("Chain lubrication keeps the drivetrain quiet.", "latin"),
        ("手冲咖啡的水温一般在九十度左右。", "han"),
        ("我用V60手冲咖啡，TDS 控制在1.3%左右。", "han"),  # a few Latin words stay Chinese
        ("The word 咖啡 means coffee in this long English sentence about brewing at home.", "latin"),
        ("コーヒーを淹れる温度は九十度です。", "kana"),  # kanji with kana: Japanese, not Chinese
        ("《战国无双3》（戦国無双3）是由光荣开发的动作游戏，日文名称为せんごくむそう，本作以三大故事为主轴。", "han"),
        ("커피를 내리는 온도", "hangul"),
        ("Температура воды для кофе", "cyrillic"),
        ("12345 --- !!!", "latin"),  # no letters at all
        ("", "latin"),
    ],
)
def test_dominant_script(text: str, script: str) -> None:
    assert dominant_script(text) == script


def test_scripts_of_languages() -> None:
    assert scripts_of_languages(["en"]) == {"latin"}
    assert scripts_of_languages(["en", "fr", "de"]) == {"latin"}
    assert scripts_of_languages(["zh"]) == {"han"}
    assert scripts_of_languages(["zh-CN"]) == {"han"}  # region tags are ignored
    assert scripts_of_languages(["ja"]) == {"han", "kana"}
    assert scripts_of_languages(["en", "ru"]) == {"latin", "cyrillic"}
    assert scripts_of_languages(["multilingual"]) == ALL_SCRIPTS
    # a card listing many languages covers every script, though it lists none outside Latin
    assert scripts_of_languages(["en", "fr", "de", "es", "it", "pt", "nl", "sv", "da", "fi"]) == ALL_SCRIPTS


def test_the_packaged_encoder_declares_english() -> None:
    assert card_languages(default_model_path()) == ("en",)


@pytest.mark.parametrize(
    ("front_matter", "languages"),
    [
        ("language:\n- zh\n- en\nlicense: mit\n", ("zh", "en")),
        ("language: [zh, 'en']\n", ("zh", "en")),
        ("license: mit\ntags:\n- sentence-transformers\n- multilingual\n", ("multilingual",)),
        ("license: mit\n", None),
    ],
)
def test_card_languages(tmp_path: Path, front_matter: str, languages: tuple[str, ...] | None) -> None:
    (tmp_path / "README.md").write_text(f"---\n{front_matter}---\n# A model\n\nlanguage: fr (prose, not the card)\n",
                                        encoding="utf-8")
    assert card_languages(tmp_path) == languages


def test_a_folder_without_a_card_has_unknown_languages(tmp_path: Path) -> None:
    assert card_languages(tmp_path) is None
    (tmp_path / "README.md").write_text("# No front matter\nlanguage: en\n", encoding="utf-8")
    assert card_languages(tmp_path) is None


def test_coverage_counts_documents_and_names_the_gap() -> None:
    texts = ["手冲咖啡的水温。"] * 3 + ["Chain lube."] * 6 + ["Температура воды"]
    gap = coverage("all-MiniLM-L6-v2", ("en",), texts)
    assert gap.documents == 10 and gap.scripts == {"han": 3, "latin": 6, "cyrillic": 1}
    assert gap.uncovered == {"han": 3, "cyrillic": 1}
    assert gap.uncovered_fraction == pytest.approx(0.4)
    assert gap.describe_gap() == (
        "4 of 10 documents (40%) are Chinese (Han script) or Cyrillic script, which the encoder "
        "all-MiniLM-L6-v2 (en) does not cover"
    )
    assert coverage("m", ("multilingual",), texts).uncovered == {}
    assert coverage("m", None, texts).uncovered == {}  # unknown languages: nothing is judged


def test_a_tiny_gap_is_not_rounded_to_zero() -> None:
    gap = coverage("m", ("en",), ["咖啡的水温很重要"] + ["Chain lube."] * 999)
    assert "1 of 1,000 documents (<1%)" in gap.describe_gap()
