"""TREC run files and qrels writing (pytest_ragmetrics.trec)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from pytest_ragmetrics import InputError, load_qrels, read_run, write_qrels, write_run


def write(tmp_path: Path, text: str | bytes, name: str = "run.txt") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_read_run_orders_by_score_then_doc_id_descending(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "q1 Q0 a 1 1.0 sys\n"
        "q1 Q0 c 2 3.0 sys\n"
        "q1 Q0 b 3 1.0 sys\n"  # ties with a: b > a, so b first
        "q1 Q0 d10 4 1.0 sys\n"  # string order: d10 > b > a
        "q2 Q0 x 1 -1 sys\n"
        "q2 Q0 y 2 -0.5 sys\n",
    )
    assert read_run(path) == {"q1": ["c", "d10", "b", "a"], "q2": ["y", "x"]}


def test_read_run_ignores_the_rank_column_and_the_tag(tmp_path: Path) -> None:
    path = write(tmp_path, "q Q0 low 1 0.1 tagA\nq Q0 high 99 0.9 tagB\n")
    assert read_run(path) == {"q": ["high", "low"]}


def test_read_run_number_formats_tabs_blank_lines_crlf_and_bom(tmp_path: Path) -> None:
    text = "\ufeffq\tQ0\ta\t1\t1e-3\trun\r\n\r\nq Q0 b 2 +2.5E1 run\r\nq Q0 c 3 inf run\r\n   \nq Q0 d 4 -inf run\n"
    path = write(tmp_path, text.encode("utf-8"))
    assert read_run(path) == {"q": ["c", "b", "a", "d"]}


def test_read_run_keeps_query_order_of_first_appearance(tmp_path: Path) -> None:
    path = write(tmp_path, "z Q0 a 1 1 r\na Q0 a 1 1 r\nm Q0 a 1 1 r\nz Q0 b 2 0 r\n")
    assert list(read_run(path)) == ["z", "a", "m"]


def test_read_run_non_ascii_ids_sort_by_code_point(tmp_path: Path) -> None:
    # strcmp on UTF-8 bytes (trec_eval) and Python's code-point order agree: '文' > 'é' > 'z'.
    path = write(tmp_path, "q Q0 z 1 0 r\nq Q0 é 2 0 r\nq Q0 文 3 0 r\n")
    assert read_run(path) == {"q": ["文", "é", "z"]}


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("q Q0 a 1 1.0 sys\nq Q0 b 2 1.0\n", "line 2", "expected 6 columns (qid Q0 doc rank score tag), got 5"),
        ("q Q0 a 1 1.0 sys extra\n", "line 1", "expected 6 columns"),
        ("q Q0 a 1 1.0 sys\n\nq Q0 b 2 high sys\n", "line 3", "score 'high' is not a number"),
        ("q Q0 a 1 nan sys\n", "line 1", "score is NaN"),
        ("q Q0 a 1 1 s\nq Q0 b 2 1 s\nq Q0 a 3 0 s\n", "line 3", "appears twice for query 'q' (first on line 1)"),
    ],
)
def test_read_run_errors_name_file_line_and_reason(tmp_path: Path, text: str, line: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        read_run(path)
    message = str(info.value)
    assert str(path) in message and line in message and fragment in message
    assert info.value.path == str(path) and info.value.where == line


def test_same_document_under_two_queries_is_fine(tmp_path: Path) -> None:
    assert read_run(write(tmp_path, "q1 Q0 a 1 1 s\nq2 Q0 a 1 1 s\n")) == {"q1": ["a"], "q2": ["a"]}


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_read_run_empty_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError, match="the run file is empty"):
        read_run(path)


def test_read_run_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_run(tmp_path / "nope.run")
    with pytest.raises(InputError, match="is a directory"):
        read_run(tmp_path)


def test_read_run_bad_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, b"q Q0 a 1 1 s\nq Q0 \xff 2 0 s\n")
    with pytest.raises(InputError) as info:
        read_run(path)
    assert "line 2" in str(info.value) and "not valid UTF-8" in str(info.value)


def test_write_run_without_scores_reproduces_the_given_order(tmp_path: Path) -> None:
    # An order that trec_eval's sort would never produce on its own (ids ascending).
    rankings = {"q1": ["a", "b", "c", "d"], "q2": ["z"], "q3": []}
    out = io.StringIO()
    write_run(out, rankings, tag="mine")
    lines = out.getvalue().splitlines()
    assert lines[0] == "q1 Q0 a 1 -1.0 mine"
    assert lines[3] == "q1 Q0 d 4 -4.0 mine"
    assert len(lines) == 5  # the empty ranking writes nothing
    path = write(tmp_path, out.getvalue())
    assert read_run(path) == {"q1": ["a", "b", "c", "d"], "q2": ["z"]}


def test_write_run_with_scores_round_trips_exact_floats(tmp_path: Path) -> None:
    # 0.1 + 0.2 = 0.30000000000000004 > 0.3: written with fewer digits, a and b would tie
    # and the tie rule would put b first.
    scores = [0.1 + 0.2, 0.3, 1 / 3, 1e-300]
    out = io.StringIO()
    write_run(out, {"q": ["a", "b", "c", "d"]}, {"q": scores})
    parsed = [float(line.split()[4]) for line in out.getvalue().splitlines()]
    assert parsed == scores
    path = write(tmp_path, out.getvalue())
    assert read_run(path) == {"q": ["c", "a", "b", "d"]}


def test_write_qrels_round_trips_through_load_qrels(tmp_path: Path) -> None:
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"x": 1}}
    out = io.StringIO()
    write_qrels(out, qrels)
    assert out.getvalue() == "q1 0 d1 2\nq1 0 d2 0\nq2 0 x 1\n"
    path = write(tmp_path, out.getvalue(), "qrels.txt")
    assert load_qrels(path) == qrels
    # pairs form too
    out2 = io.StringIO()
    write_qrels(out2, iter(qrels.items()))
    assert out2.getvalue() == out.getvalue()
