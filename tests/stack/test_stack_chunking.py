"""Chunking: stable ``doc#i-n`` ids, window sizes, overlap and word boundaries."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragmetrics.stack import Document, chunk_documents, split_spans, split_text

WORDS = "brake pads wear thin over time and squeal when the car stops on wet roads".split()


def prose(n_words: int) -> str:
    return " ".join(f"{WORDS[i % len(WORDS)]}{i}" for i in range(n_words))


def test_ids_are_one_based_of_n_and_stable() -> None:
    docs = [Document("brakes", "Brakes", prose(150)), Document("short", "", "tiny")]
    chunks = chunk_documents(docs, chunk_size=300, overlap=60)
    brakes = [c for c in chunks if c.doc_id == "brakes"]
    n = len(brakes)
    assert n >= 3
    assert [c.chunk_id for c in brakes] == [f"brakes#{i}-{n}" for i in range(1, n + 1)]
    assert [(c.index, c.count) for c in brakes] == [(i, n) for i in range(1, n + 1)]
    assert [c.chunk_id for c in chunks if c.doc_id == "short"] == ["short#1-1"]
    assert chunk_documents(docs, 300, 60) == chunks  # deterministic


def test_windows_respect_size_overlap_and_word_boundaries() -> None:
    text = prose(400)
    words = set(text.split())
    windows = split_text(text, 300, 60)
    assert all(len(w) <= 300 for w in windows)
    # no word is cut in half when spaces are near the boundary
    for w in windows:
        assert set(w.split()) <= words
    # consecutive windows overlap: the next one starts inside the previous one
    for a, b in zip(windows, windows[1:]):
        head = b.split()[0]
        assert head in a.split()
        shared = a[a.rindex(head) :]
        assert 30 <= len(shared) <= 90, shared
    # every word of the text is in some window
    assert set().union(*(w.split() for w in windows)) == words


def test_zero_overlap_partitions_the_words() -> None:
    text = prose(200)
    windows = split_text(text, 120, 0)
    assert " ".join(windows).split() == text.split()


def test_cjk_text_is_cut_at_sentence_ends_or_hard() -> None:
    text = "战国无双是光荣开发的游戏。本作以三大故事为主轴。" * 20
    windows = split_text(text, 50, 10)
    assert all(len(w) <= 50 for w in windows)
    assert sum(w.endswith("。") for w in windows[:-1]) >= len(windows) // 2
    joined = "".join(windows)
    assert set(joined) == set(text)


def test_title_prefix_and_options() -> None:
    doc = Document("oil", "Engine oil", prose(120))
    with_title = chunk_documents([doc], 200, 40)
    assert all(c.text.startswith("Engine oil\n") for c in with_title)
    without = chunk_documents([doc], 200, 40, with_title=False)
    assert [c.chunk_id for c in without] == [c.chunk_id for c in with_title]
    assert all(len(c.text) <= 200 for c in without)
    whole = chunk_documents([doc], None)
    assert [c.chunk_id for c in whole] == ["oil#1-1"]
    assert whole[0].text == f"Engine oil\n{doc.text}"


def test_empty_documents() -> None:
    docs = [Document("empty", "", "   "), Document("titled", "Only a title", "")]
    chunks = chunk_documents(docs, 100, 10)
    assert [(c.chunk_id, c.text) for c in chunks] == [("titled#1-1", "Only a title")]


@pytest.mark.parametrize(("size", "overlap"), [(100, 100), (100, 150), (0, 0), (100, -1)])
def test_invalid_settings(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"chunk_size|overlap"):
        chunk_documents([Document("a", "", "text")], size, overlap)


@settings(max_examples=int(os.environ.get("RAGMETRICS_HYPOTHESIS_EXAMPLES", "40")), deadline=None)
@given(
    words=st.lists(st.from_regex(r"[a-z]{1,12}", fullmatch=True), min_size=1, max_size=200),
    sep=st.sampled_from([" ", "  ", "\n"]),
    size=st.integers(min_value=20, max_value=400),
    ratio=st.floats(min_value=0.0, max_value=0.9),
)
def test_spans_cover_the_text_in_order(words: list[str], sep: str, size: int, ratio: float) -> None:
    text = f" {sep.join(words)} "
    overlap = int(size * ratio)
    spans = split_spans(text, size, overlap)
    assert spans and all(0 < end - start <= size for start, end in spans)
    assert [text[s:e] for s, e in spans] == split_text(text, size, overlap)
    starts = [s for s, _ in spans]
    assert starts == sorted(set(starts))  # strictly advancing
    for (_, e1), (s2, e2) in zip(spans, spans[1:]):
        assert s2 <= e1 + len(sep)  # no gap beyond the separator between windows
        assert e2 > e1
    covered = set()
    for s, e in spans:
        covered.update(range(s, e))
        assert not text[s].isspace() and not text[e - 1].isspace()
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
