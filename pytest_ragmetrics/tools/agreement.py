"""Agreement between two annotators' judgments: Cohen's kappa and the pairs to discuss.

A golden set whose labels drift between people measures the people, not the
retriever: so at least two annotators judge overlapping samples, and when their
agreement is low the grading standard is discussed again before the labels are
used. This module compares two judgment files (any format :func:`load_golden`
reads, typically the JSONL golden format with graded ``rel``) over the
(question, document) pairs both annotators judged:

- Cohen's kappa, unweighted for binary labels and linear- or quadratic-weighted
  for graded ones (so 0 vs 2 counts as a worse disagreement than 1 vs 2);
- raw agreement (share of identical grades) and the confusion matrix;
- kappa on "relevant or not" at a relevance level, which is what Recall and
  hit rate see;
- a seeded bootstrap interval over questions (judgments of one question are not
  independent, so whole questions are resampled);
- the pairs that disagree most, with the question text, to start the discussion.

Pairs only one annotator judged are counted and reported, never used.

Weights use the ordinal position of each grade among the grades that occur
(``|i - j|`` or ``(i - j)^2`` of their indexes in the sorted list), never the grade
numbers: grades are ordered categories, not distances, and weighting by the numbers
let one pair graded 1000 by both annotators dwarf every real disagreement (0 vs 1
became a near-agreement, and kappa 0.24 read 0.99). This is exactly
``sklearn.metrics.cohen_kappa_score(..., weights=...)``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pytest_ragmetrics.errors import InputError, RagMetricsError
from pytest_ragmetrics.files import json_lines

__all__ = [
    "WEIGHTS",
    "Agreement",
    "Disagreement",
    "agreement",
    "cohen_kappa",
    "format_kappa",
    "kappa_band",
    "render_table",
]

WEIGHTS = ("none", "linear", "quadratic")

#: Landis & Koch (1977) labels: a widely used convention, not a statistical test.
_BANDS = ((0.0, "poor (below chance)"), (0.20, "slight"), (0.40, "fair"), (0.60, "moderate"),
          (0.80, "substantial"), (1.0, "almost perfect"))


def kappa_band(kappa: float | None) -> str:
    """The Landis & Koch label of a kappa value (``undefined`` for None)."""
    if kappa is None or math.isnan(kappa):
        return "undefined"
    if kappa < 0:
        return _BANDS[0][1]
    for upper, label in _BANDS[1:]:
        if kappa <= upper + 1e-12:
            return label
    return _BANDS[-1][1]


def _check_weights(weights: str | None) -> str:
    w = "none" if weights is None else str(weights).lower()
    if w not in WEIGHTS:
        raise RagMetricsError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    return w


def cohen_kappa(a: Sequence[int], b: Sequence[int], weights: str | None = "none") -> float | None:
    """Cohen's kappa of two equally long label sequences.

    ``weights``: ``none`` (unweighted), ``linear`` (disagreement ``|i - j|``) or
    ``quadratic`` (``(i - j)^2``), on the labels' positions ``i``, ``j`` among the sorted
    labels that occur (their order, never their numbers). Returns None when kappa is
    undefined: both annotators gave every pair one and the same label, so chance
    agreement is already perfect (scikit-learn returns NaN there).
    """
    w = _check_weights(weights)
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length: {len(a)} vs {len(b)}")
    if not a:
        raise ValueError("no labels to compare")
    labels = sorted(set(a) | set(b))
    index = {label: i for i, label in enumerate(labels)}
    size = len(labels)
    observed = [[0] * size for _ in range(size)]
    for x, y in zip(a, b):
        observed[index[x]][index[y]] += 1
    n = len(a)
    rows = [sum(r) for r in observed]
    cols = [sum(observed[i][j] for i in range(size)) for j in range(size)]
    weight = _weight_matrix(labels, w)
    cells = [(i, j) for i in range(size) for j in range(size)]
    disagree_observed = sum(weight[i][j] * observed[i][j] for i, j in cells) / n
    disagree_expected = sum(weight[i][j] * rows[i] * cols[j] for i, j in cells) / (n * n)
    if disagree_expected == 0:
        return None
    return 1.0 - disagree_observed / disagree_expected


@dataclass(frozen=True)
class Disagreement:
    """One (question, document) pair the two annotators graded differently."""

    qid: str
    doc_id: str
    question: str
    grade_a: int
    grade_b: int

    @property
    def difference(self) -> int:
        return abs(self.grade_a - self.grade_b)

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "doc_id": self.doc_id, "question": self.question,
                "grade_a": self.grade_a, "grade_b": self.grade_b, "difference": self.difference}


@dataclass
class Agreement:
    """The comparison of two judgment files over the pairs both judged."""

    source_a: str
    source_b: str
    weights: str                     # the weighting of ``kappa``
    n: int                           # overlapping (qid, doc) pairs
    n_questions: int                 # questions with at least one overlapping pair
    kappa: float | None
    kappas: dict[str, float | None]  # every weighting, for reference
    raw_agreement: float
    relevance_level: int
    binary_kappa: float | None       # relevant (grade >= level) or not
    labels: list[int]
    confusion: list[list[int]]       # rows: A's grade, columns: B's grade, in ``labels`` order
    only_a: int
    only_b: int
    questions_only_a: int
    questions_only_b: int
    text_differs: list[str]          # qids whose question text differs between the files
    disagreements: list[Disagreement]
    interval: tuple[float, float] | None = None
    interval_draws: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def band(self) -> str:
        return kappa_band(self.kappa)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        shown = self.disagreements if top is None else self.disagreements[:top]
        return {
            "a": self.source_a, "b": self.source_b,
            "n": self.n, "n_questions": self.n_questions,
            "weights": self.weights, "kappa": self.kappa, "band": self.band,
            "kappa_interval_95": list(self.interval) if self.interval else None,
            "interval_draws": self.interval_draws,
            "kappas": self.kappas, "raw_agreement": self.raw_agreement,
            "relevance_level": self.relevance_level, "binary_kappa": self.binary_kappa,
            "labels": self.labels, "confusion": self.confusion,
            "only_a": self.only_a, "only_b": self.only_b,
            "questions_only_a": self.questions_only_a, "questions_only_b": self.questions_only_b,
            "text_differs": self.text_differs,
            "n_disagreements": len(self.disagreements),
            "disagreements": [d.to_dict() for d in shown],
            "notes": self.notes,
        }


def _weight_matrix(labels: Sequence[int], weights: str) -> list[list[float]]:
    """Disagreement weights over ``labels`` (sorted), by position: the grades' order, not their numbers."""
    positions = range(len(labels))
    if weights == "none":
        return [[0.0 if i == j else 1.0 for j in positions] for i in positions]
    if weights == "linear":
        return [[float(abs(i - j)) for j in positions] for i in positions]
    return [[float((i - j) ** 2) for j in positions] for i in positions]


def _bootstrap(
    groups: list[tuple[list[int], list[int]]], labels: list[int], weights: str, draws: int, seed: int
) -> tuple[float, float] | None:
    """Percentile 95% interval of kappa, resampling whole questions with a seeded generator
    (the same files print the same interval every run). Vectorised: each draw's confusion
    matrix is the sum of the sampled questions' matrices."""
    import numpy as np

    n_groups = len(groups)
    if n_groups < 2 or draws < 1:
        return None
    index = {label: i for i, label in enumerate(labels)}
    size = len(labels)
    per_question = np.zeros((n_groups, size * size))
    for g, (xs, ys) in enumerate(groups):
        for x, y in zip(xs, ys):
            per_question[g, index[x] * size + index[y]] += 1
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_groups, size=(draws, n_groups))
    offsets = (np.arange(draws)[:, None] * n_groups + picks).ravel()
    multiplicity = np.bincount(offsets, minlength=draws * n_groups).reshape(draws, n_groups)
    observed = (multiplicity @ per_question).reshape(draws, size, size)
    total = observed.sum(axis=(1, 2))
    rows = observed.sum(axis=2)
    cols = observed.sum(axis=1)
    w = np.asarray(_weight_matrix(labels, weights))
    disagree_observed = (observed * w).sum(axis=(1, 2)) / total
    disagree_expected = (rows[:, :, None] * cols[:, None, :] * w).sum(axis=(1, 2)) / (total * total)
    defined = disagree_expected > 0
    if defined.sum() < draws / 2:
        return None
    kappas = 1.0 - disagree_observed[defined] / disagree_expected[defined]
    lo, hi = np.percentile(kappas, [2.5, 97.5])
    return float(lo), float(hi)


def _annotator_names(a: Path, b: Path, given: Sequence[str] | None) -> tuple[str, str]:
    """Who made each file: its ``_meta.annotator``, else the name ``annotators`` gives it. Agreement
    is between two people, so a file that names no one (golden YAML, qrels, a judgments file without
    ``_meta.annotator``, or a format conversion of another file) must be named by the caller."""
    from pytest_ragmetrics.tools.candidates import file_meta

    recorded = []
    for path in (a, b):
        name = (file_meta(path) or {}).get("annotator") if path.is_file() else None
        recorded.append(name if isinstance(name, str) and name else None)
    if given is None:
        unnamed = [str(path) for path, name in zip((a, b), recorded) if name is None]
        if unnamed:
            raise InputError(None, None, f"{' and '.join(unnamed)} {'names' if len(unnamed) == 1 else 'name'} no "
                                         "annotator (_meta.annotator): agreement is between two people's "
                                         "independent judgments, and a file with no name may be the other "
                                         "file converted or copied; pass --annotators NAME_A,NAME_B to say "
                                         "who made each file")
        return recorded[0], recorded[1]  # type: ignore[return-value]
    if len(given) != 2 or not all(isinstance(n, str) and n.strip() for n in given):
        raise RagMetricsError(f"annotators must be two names, one for each file, got {list(given)!r}")
    names = (given[0].strip(), given[1].strip())
    for path, name, said in zip((a, b), recorded, names):
        if name is not None and name != said:
            raise InputError(str(path), "_meta.annotator", f"is {name!r}, but --annotators names {said!r} for "
                                                           "this file")
    return names


def _refuse_one_annotator(a: Path, b: Path, ga: Any, gb: Any, annotators: Sequence[str] | None) -> bool:
    """Kappa of a file with itself is 1.0 "almost perfect" and would pass any floor: refuse what
    cannot be two annotators' independent judgments (one file, one annotator, an unnamed file, or a
    copy: the same grades and the same notes). Returns whether the grades of every shared pair are
    identical, which two real annotators can reach but a reader should check."""
    why = "; agreement needs two annotators' independent judgments of the same questions"
    try:
        same = os.path.samefile(a, b)
    except OSError:
        same = False
    if same:
        raise InputError(None, None, f"{a} and {b} are the same file{why}")
    names = _annotator_names(a, b, annotators)
    if names[0] == names[1]:
        raise InputError(None, None, f"{a} and {b} are both by annotator {names[0]!r}{why}")
    judged_b = {q.qid: q.judgments for q in gb}
    shared = [(q.qid, doc) for q in ga if q.qid in judged_b for doc in q.judgments if doc in judged_b[q.qid]]
    by_a = {q.qid: q.judgments for q in ga}
    identical = bool(shared) and all(by_a[q][d] == judged_b[q][d] for q, d in shared)
    if identical:
        notes_a, notes_b = (_notes(path, shared) for path in (a, b))
        if notes_a and notes_a == notes_b:
            raise InputError(None, None, f"{a} and {b} hold the same grade and the same note for every question "
                                         f"and document both judged: one file copied, not two annotators{why}")
    return identical


def _notes(path: Path, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The non-empty notes a JSON-lines judgments file holds on ``pairs``; none for other formats."""
    found: dict[tuple[str, str], str] = {}
    if not path.is_file() or path.suffix.lower() != ".jsonl":
        return found
    wanted = set(pairs)
    for _, record in json_lines(path):
        if not isinstance(record, dict) or isinstance(record.get("_meta"), dict):
            continue
        for cand in record.get("candidates") or []:
            if isinstance(cand, dict) and isinstance(cand.get("note"), str) and cand["note"].strip():
                key = (str(record.get("qid")), str(cand.get("doc_id")))
                if key in wanted:
                    found[key] = cand["note"]
    return found


def agreement(
    a: Any,
    b: Any,
    weights: str = "auto",
    *,
    relevance_level: int = 1,
    draws: int = 1000,
    seed: int = 0,
    annotators: Sequence[str] | None = None,
) -> Agreement:
    """Compare two judgment sets (paths or :class:`GoldenSet` objects).

    ``weights="auto"`` means linear when the overlapping pairs use more than two
    grade values, else unweighted. Raises :class:`InputError` when no pair is
    judged by both, naming how many each file holds. Files (not sets) must be two named
    annotators' (``_meta.annotator``, else ``annotators``, one name per file) and not a copy.
    """
    from pytest_ragmetrics.golden import GoldenSet, load_golden

    ga = a if isinstance(a, GoldenSet) else load_golden(a)
    gb = b if isinstance(b, GoldenSet) else load_golden(b)
    identical = False
    if not isinstance(a, GoldenSet) and not isinstance(b, GoldenSet):
        identical = _refuse_one_annotator(Path(a), Path(b), ga, gb, annotators)
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, int) or relevance_level < 1:
        raise RagMetricsError(f"relevance level must be an integer >= 1, got {relevance_level!r}")

    pairs: list[tuple[str, str, str, int, int]] = []
    only_a = only_b = 0
    text_differs: list[str] = []
    for qa in ga:
        if qa.qid not in gb:
            only_a += len(qa.judgments)
            continue
        qb = gb[qa.qid]
        if " ".join(qa.text.split()) != " ".join(qb.text.split()):
            text_differs.append(qa.qid)
        for doc in sorted(qa.judgments):
            if doc in qb.judgments:
                pairs.append((qa.qid, doc, qa.text, qa.judgments[doc], qb.judgments[doc]))
            else:
                only_a += 1
        only_b += sum(1 for doc in qb.judgments if doc not in qa.judgments)
    only_b += sum(len(qb.judgments) for qb in gb if qb.qid not in ga)
    questions_only_a = sum(1 for q in ga if q.qid not in gb)
    questions_only_b = sum(1 for q in gb if q.qid not in ga)

    if not pairs:
        shared = sum(1 for q in ga if q.qid in gb)
        hint = (f"they share {shared} question ids but no judged document"
                if shared else
                f"they share no question id (e.g. {ga.queries[0].qid!r} in A, {gb.queries[0].qid!r} in B)")
        raise InputError(
            None, None,
            f"no (question, document) pair is judged in both {ga.source} ({sum(len(q.judgments) for q in ga)} "
            f"pairs, {len(ga)} questions) and {gb.source} ({sum(len(q.judgments) for q in gb)} pairs, "
            f"{len(gb)} questions): {hint}; kappa needs overlapping judgments",
        )

    labels_a = [p[3] for p in pairs]
    labels_b = [p[4] for p in pairs]
    labels = sorted(set(labels_a) | set(labels_b))
    chosen = ("linear" if len(labels) > 2 else "none") if str(weights).lower() == "auto" else _check_weights(weights)
    kappas = {w: cohen_kappa(labels_a, labels_b, w) for w in WEIGHTS}
    index = {label: i for i, label in enumerate(labels)}
    confusion = [[0] * len(labels) for _ in labels]
    for x, y in zip(labels_a, labels_b):
        confusion[index[x]][index[y]] += 1
    binary_kappa = cohen_kappa([int(x >= relevance_level) for x in labels_a],
                               [int(y >= relevance_level) for y in labels_b], "none")

    by_question: dict[str, tuple[list[int], list[int]]] = {}
    for qid, _, _, x, y in pairs:
        group = by_question.setdefault(qid, ([], []))
        group[0].append(x)
        group[1].append(y)
    interval = _bootstrap(list(by_question.values()), labels, chosen, draws, seed)

    disagreements = sorted(
        (Disagreement(qid, doc, text, x, y) for qid, doc, text, x, y in pairs if x != y),
        key=lambda d: (-d.difference, d.qid, d.doc_id),
    )
    notes: list[str] = []
    if identical:
        notes.append("identical on every pair: check these are independent judgments (two people rarely "
                     "agree on every grade; a converted or edited copy of one file always does).")
    if kappas[chosen] is None:
        notes.append("kappa is undefined: both annotators gave every overlapping pair the same single grade, "
                     "so chance agreement is already perfect (typical when only relevant documents are listed); "
                     "keep the judged non-relevant candidates (rel 0) in both files.")
    if len(labels) > 2 and chosen == "none":
        notes.append("graded labels with unweighted kappa: a 0-vs-2 disagreement counts no more than 1-vs-2.")
    if text_differs:
        notes.append(f"{len(text_differs)} questions have different text in the two files "
                     f"(e.g. {text_differs[0]!r}): the annotators may have judged different questions.")
    return Agreement(
        source_a=ga.source, source_b=gb.source, weights=chosen, n=len(pairs),
        n_questions=len(by_question), kappa=kappas[chosen], kappas=kappas,
        raw_agreement=sum(1 for x, y in zip(labels_a, labels_b) if x == y) / len(pairs),
        relevance_level=relevance_level, binary_kappa=binary_kappa, labels=labels, confusion=confusion,
        only_a=only_a, only_b=only_b, questions_only_a=questions_only_a, questions_only_b=questions_only_b,
        text_differs=text_differs, disagreements=disagreements, interval=interval,
        interval_draws=draws if interval else 0, notes=notes,
    )


# ------------------------------------------------------------------------------ output


def format_kappa(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def render_table(result: Agreement, top: int = 20) -> str:
    """The report people read: kappa with n and its band, the confusion matrix, the worst pairs."""
    from pytest_ragmetrics.report.tables import markdown_table

    r = result
    label = {"none": "unweighted", "linear": "linear-weighted", "quadratic": "quadratic-weighted"}[r.weights]
    out = [
        f"Annotator agreement: A = {r.source_a}, B = {r.source_b}",
        f"n = {r.n} (question, document) pairs judged by both, over {r.n_questions} questions; "
        f"not used: {r.only_a} pairs judged only in A, {r.only_b} only in B"
        + (f" ({r.questions_only_a} questions only in A, {r.questions_only_b} only in B)"
           if r.questions_only_a or r.questions_only_b else "") + ".",
        "",
    ]
    kappa_cell = format_kappa(r.kappa)
    if r.interval:
        kappa_cell += f" (95% CI {r.interval[0]:.2f} to {r.interval[1]:.2f})"
    rows: list[list[object]] = [
        [f"Cohen's kappa, {label}", kappa_cell, r.band],
        ["raw agreement (same grade)", f"{r.raw_agreement:.4f}", f"{round(r.raw_agreement * r.n)} of {r.n}"],
        [f"kappa, relevant or not (grade >= {r.relevance_level})", format_kappa(r.binary_kappa),
         kappa_band(r.binary_kappa)],
    ]
    for w in WEIGHTS:
        if w != r.weights and len(r.labels) > 2:
            name = "unweighted" if w == "none" else f"{w} weights"
            rows.append([f"  for reference: {name}", format_kappa(r.kappas[w]), kappa_band(r.kappas[w])])
    out.append(markdown_table(["measure", "value", "reading"], rows))
    out.append("")
    out.append(
        "Readings are Landis & Koch's bands (below 0 poor, 0-0.20 slight, 0.21-0.40 fair, 0.41-0.60 moderate, "
        "0.61-0.80 substantial, 0.81-1 almost perfect): a convention, not a test. When agreement is low, "
        "write the grading standard down and re-judge the overlap before trusting the metrics."
    )
    if r.interval:
        out.append(f"The interval comes from {r.interval_draws} seeded resamples of whole questions "
                   f"(judgments of one question are not independent); with {r.n_questions} questions, "
                   "its width is what the overlap can tell.")
    out.append(f"n = {r.n}: one pair moves raw agreement by 1/n = {1 / r.n:.4f}.")
    out.append("")
    out.append("Confusion (rows: A's grade, columns: B's grade):")
    out.append(markdown_table(["A \\ B"] + [str(x) for x in r.labels],
                              [[str(x), *row] for x, row in zip(r.labels, r.confusion)]))
    out.extend(["", *r.notes] if r.notes else [])
    out.append("")
    if not r.disagreements:
        out.append("No disagreement: every overlapping pair has the same grade.")
    else:
        shown = r.disagreements[:top] if top > 0 else []
        out.append(f"Pairs that disagree most ({len(shown)} of {len(r.disagreements)}, largest grade difference "
                   "first):")
        if shown:
            out.append(markdown_table(
                ["qid", "document", "A", "B", "question"],
                [[d.qid, d.doc_id, d.grade_a, d.grade_b, _clip(d.question)] for d in shown],
            ))
    return "\n".join(out).rstrip() + "\n"


def _clip(text: str, width: int = 70) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"
