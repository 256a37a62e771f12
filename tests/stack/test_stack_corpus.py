"""Corpus loading: folders of Markdown/text, corpus.jsonl, and the errors users make."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ragmetrics.errors import InputError
from pytest_ragmetrics.stack import CorpusError, Document, load_corpus


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_folder_ids_titles_and_order(tmp_path: Path) -> None:
    write(tmp_path / "brakes.md", "# Brake pads\n\nPads wear thin.\n")
    write(tmp_path / "engine" / "oil.txt", "Change the oil yearly.\n")
    write(tmp_path / "engine" / "coolant.md", "Intro line.\n\n# Coolant\nKeeps it cool.")
    write(tmp_path / "notes.rst", "not a corpus file")
    write(tmp_path / ".hidden" / "skip.md", "# Hidden\nignored")
    docs = load_corpus(tmp_path)
    assert [d.doc_id for d in docs] == ["brakes", "engine/coolant", "engine/oil"]
    by_id = {d.doc_id: d for d in docs}
    # a heading that opens the file becomes the title and leaves the text
    assert by_id["brakes"] == Document("brakes", "Brake pads", "Pads wear thin.")
    # a later heading is the title, but the text keeps it in place
    assert by_id["engine/coolant"].title == "Coolant"
    assert by_id["engine/coolant"].text.startswith("Intro line.")
    assert by_id["engine/oil"].title == ""


def test_jsonl_file_and_folder_with_corpus_jsonl(tmp_path: Path) -> None:
    lines = [
        {"doc_id": "d1", "title": "One", "text": "first"},
        {"_id": "d2", "text": "second"},  # BEIR spelling, no title
    ]
    f = write(tmp_path / "corpus.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    write(tmp_path / "stray.md", "# Not read\nwhen corpus.jsonl is present")
    for source in (f, tmp_path):
        docs = load_corpus(source)
        assert docs == [Document("d1", "One", "first"), Document("d2", "", "second")]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"doc_id": "a", "text": "x"}\n{"doc_id": "b", "text": \n', "line 2: invalid JSON"),
        (
            '{"doc_id": "a", "text": "x"}\n{"title": "t"}\n',
            "line 2: missing field(s): doc_id, text",
        ),
        ('{"doc_id": "a", "text": "x"}\n{"doc_id": "b"}\n', "line 2: missing field(s): text"),
        (
            '{"doc_id": "a", "text": "x"}\n\n{"doc_id": "a", "text": "y"}\n',
            "line 3: duplicate doc_id 'a' (first on line 1)",
        ),
        ('{"doc_id": 7, "text": "x"}\n', "line 1: doc_id must be a non-empty string"),
        ('{"doc_id": "a#1", "text": "x"}\n', "chunk id separator"),
        ('{"doc_id": "a", "text": ["x"]}\n', "line 1: title and text must be strings"),
        ('["a", "b"]\n', "line 1: expected a JSON object"),
        ("\n\n", "holds no documents"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, content: str, fragment: str) -> None:
    f = write(tmp_path / "corpus.jsonl", content)
    with pytest.raises(CorpusError) as info:
        load_corpus(f)
    assert fragment in str(info.value)
    assert str(f) in str(info.value)
    assert isinstance(info.value, InputError) and isinstance(info.value, ValueError)


def test_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="holds no documents"):
        load_corpus(tmp_path)
    with pytest.raises(CorpusError, match="no such corpus file or folder$"):
        load_corpus(tmp_path / "missing")
    write(tmp_path / "a.md", "alpha")
    write(tmp_path / "a.txt", "alpha again")
    with pytest.raises(CorpusError, match="duplicate doc_id 'a'"):
        load_corpus(tmp_path)


def test_a_missing_relative_corpus_names_where_it_was_looked_for(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # a conftest's "docs/corpus" is read from wherever pytest was started, not from beside the conftest
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError) as caught:
        load_corpus("docs/corpus")
    assert str(caught.value).endswith(f"no such corpus file or folder (looked for {tmp_path / 'docs' / 'corpus'}: "
                                      "a relative path is read from the current directory)")


def test_folder_rejects_non_utf8_and_wrong_file_type(tmp_path: Path) -> None:
    (tmp_path / "bad.md").write_bytes(b"caf\xe9")
    with pytest.raises(CorpusError, match=r"bad\.md.*not UTF-8"):
        load_corpus(tmp_path)
    with pytest.raises(CorpusError, match=r"must be \.jsonl"):
        load_corpus(write(tmp_path / "corpus.json", "{}"))


def test_shared_collection_loads(collections_dir: Path) -> None:
    docs = load_corpus(collections_dir / "cmrc2018")
    assert len(docs) == 1104
    assert len({d.doc_id for d in docs}) == 1104
    assert docs[0].doc_id == "DEV_0" and docs[0].title
