"""read_run's fast path must give exactly what the line-by-line checking reader gives.

The fast reader (pytest_ragmetrics.trec._read_run_fast) groups lines, skips the sort when a
query's scores strictly decrease and bails out (None) at the first doubt; the checking reader
is the reference. Random run files with ties, interleaved queries, repeated scores, exotic
whitespace and errors exercise both, and every outcome must match.
"""

from __future__ import annotations

import random

import pytest

from pytest_ragmetrics.errors import InputError
from pytest_ragmetrics.trec import _read_run_checked, _read_run_fast


def random_run_text(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 40)):
        qid = rng.choice(["q1", "q2", "q10", "é"])
        doc = rng.choice(["a", "b", "c", "d10", "文", "z"]) + str(rng.randint(0, 3))
        score = rng.choice(["1", "1.0", "0.5", "-0", "0", "2e1", "inf", "-inf", str(rng.random())])
        sep = rng.choice([" ", "\t", "  "] * 10 + ["\u00a0", "\u3000"])  # both refused, as separators
        rank = rng.choice([str(rng.randint(1, 9))] * 20 + ["\uff11", "\u00b2", "x"])  # ASCII digits only
        lines.append(sep.join([qid, "Q0", doc, rank, score, "tag"]))
    if rng.random() < 0.2 and lines:
        lines.insert(rng.randrange(len(lines)), rng.choice(["", "   ", "q Q0 x 1 1.0", "q Q0 x 1 nan t", "q Q0 y 1 high t"]))
    if rng.random() < 0.2 and lines:  # strictly decreasing block, the no-sort branch
        lines = [f"s Q0 d{i} {i} {-i} t" for i in range(1, 8)] + lines
    return rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n"])


@pytest.mark.parametrize("seed", range(300))
def test_fast_path_equals_checking_reader(seed: int) -> None:
    text = random_run_text(random.Random(seed))
    try:
        expected: object = _read_run_checked(text, "run.txt")
    except InputError as exc:
        expected = exc
    fast = _read_run_fast(text)
    if isinstance(expected, InputError):
        assert fast is None, f"fast path accepted a file the checking reader rejects: {expected}"
    elif fast is not None:
        assert fast == expected
        assert list(fast) == list(expected)  # query order of first appearance


def test_fast_path_skips_the_sort_only_for_strictly_decreasing_scores() -> None:
    text = "q Q0 a 1 3 t\nq Q0 b 2 2 t\nq Q0 c 3 2 t\np Q0 x 1 5 t\np Q0 y 2 4 t\n"
    assert _read_run_fast(text) == {"q": ["a", "c", "b"], "p": ["x", "y"]}  # tie: c > b
