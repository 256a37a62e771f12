"""Questions from a query log: a seeded, stratified, deduplicated and redacted draft golden set.

``ragmetrics sample LOG.jsonl`` reads a query log, one JSON object a line::

    {"query": "how do I reset my password", "filters": {"product": "app"}, "ts": "…", "count": 3,
     "intent": "account"}

``query`` is required; ``filters`` (an object, replayed to the retriever), ``ts`` and
``count`` (how many times the question was asked, default 1) are optional, and any
other field can stratify the sample (``--by intent``, or ``--by filters.product``).

What it does, in order:

1. **Redacts personal data** in each question (unless ``keep_pii``) with
   :func:`~pytest_ragmetrics.tools.redact.redact`: e-mail addresses become ``[email]``, MAC
   addresses ``[mac]``, IP addresses ``[ip]``, Chinese resident IDs and US social security
   numbers ``[id]``, phone numbers ``[phone]`` (any country's with ``+`` or ``00``, national ones
   of the common regions), card numbers, IBANs and runs of 8 digits or more ``[number]``, looked
   for in the question's NFKC form without its invisible characters and replaced in the question
   as written; each counted by kind (:data:`PII_KINDS`). Names and street addresses are not
   recognised. Filters and the stratifying field are kept as they are: they are the
   application's own values, replayed to the retriever.
2. **Deduplicates**: questions equal after normalisation (NFKC, case folded, punctuation
   and spacing dropped) with the same filters are one question (their counts add up),
   with the wording asked most and the stratum that wording was asked in most; then
   near-duplicates, whose token sets (words; character bigrams for CJK) have a Jaccard
   overlap of at least ``near`` (default 0.8) and the same filters, join the most asked
   one, which keeps its wording and stratum.
3. **Samples** ``n`` questions, stratified: each stratum gets a share proportional to its
   number of distinct questions (largest remainders; every stratum at least one when ``n``
   allows), drawn uniformly within the stratum (its questions taken in the order of their
   ids) by a generator seeded from ``seed`` and the stratum's name, so the same log and
   seed give the same questions, whatever the order of the log's lines.

The draft is a golden JSONL file without labels: a ``_meta`` line (how it was drawn:
strata, duplicates, redactions), then one question a line with ``qid`` (``log-`` and a
hash of the normalised question and its filters: stable across seeds), ``query``,
``source: log``, ``tags`` (the stratum, ``FIELD=VALUE``), ``filters`` when the log had
some, ``candidates: []`` and ``log`` (how often it was asked, its first line, how many
forms were merged). ``ragmetrics pool --queries draft.jsonl`` reads it; annotators then
grade the pool with ``ragmetrics annotate``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import ceil, floor
from pathlib import Path
from typing import Any

from pytest_ragmetrics.errors import InputError, RagMetricsError, brief_repr
from pytest_ragmetrics.files import atomic_write_text, dumps_line, json_lines
from pytest_ragmetrics.output_paths import check_output
from pytest_ragmetrics.report.tables import counted, markdown_table
from pytest_ragmetrics.tools.leakage import normalize, tokens
from pytest_ragmetrics.tools.redact import PII_KINDS, redact

__all__ = ["DRAFT_KIND", "DRAFT_VERSION", "DEFAULT_NEAR", "PII_KINDS", "LogEntry", "Draft", "read_log", "redact",
           "allocate", "sample_log", "write_draft", "draft_summary"]

DRAFT_KIND = "ragmetrics-draft"
DRAFT_VERSION = 1
#: Jaccard overlap of token sets at or above which two questions are one.
DEFAULT_NEAR = 0.8
#: The stratum of every question when no ``--by`` is given.
ALL = "all"

# --------------------------------------------------------------------------- reading


def logged_question(record: Any, name: str, where: str) -> tuple[str, dict[str, Any] | None]:
    """A log or draft line's question and filters, or an :class:`InputError` naming the line."""
    if not isinstance(record, dict):
        raise InputError(name, where, f"expected a JSON object with \"query\", got {type(record).__name__}")
    if "query" not in record:
        raise InputError(name, where, "missing field 'query' (the question as it was asked)")
    query = record["query"]
    if not isinstance(query, str) or not query.strip():
        raise InputError(name, where, f"query must be a non-empty string, got {brief_repr(query)}")
    problem = query_problem(query)
    if problem:
        raise InputError(name, where, problem)
    filters = record.get("filters")
    if filters is not None and not isinstance(filters, dict):
        raise InputError(name, where, f"filters must be an object (or null), got {type(filters).__name__} "
                                      f"{brief_repr(filters)}")
    return query, filters


def query_problem(text: str) -> str | None:
    """What makes a non-empty question unusable, in words (None: nothing): a NUL character, which
    no retriever or annotator should get, or only invisible characters (zero-width spaces, marks)."""
    if "\x00" in text:
        return f"query contains a NUL character: {brief_repr(text)}"
    if all(ch.isspace() or unicodedata.category(ch) in ("Cf", "Cc") for ch in text):
        return f"query holds only invisible characters (zero-width spaces, format marks): {brief_repr(text)}"
    return None


@dataclass
class LogEntry:
    """One line of the log, redacted: the question, its filters, its stratum and its count."""

    line: int
    query: str
    filters: dict[str, Any] | None
    stratum: str
    count: int = 1


def _field(record: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """(found, value) of ``name`` in a record: a top-level key, else a dotted path (``filters.product``)."""
    if name in record:
        return True, record[name]
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _stratum_value(value: Any, name: str, path: str, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        text = str(value)
        if text.strip():
            return text
        raise InputError(path, where, f"--by field {name!r} is empty")
    raise InputError(path, where, f"--by field {name!r} must be a string or a number to stratify by, got "
                                  f"{type(value).__name__} {brief_repr(value)}")


def read_log(path: str | Path, by: str | None = None, by_missing: str | None = None, *, keep_pii: bool = False,
             redacted: dict[str, int] | None = None) -> list[LogEntry]:
    """The log's lines as :class:`LogEntry` (questions redacted unless ``keep_pii``; ``redacted``
    collects the counts by kind).

    A line that is not an object, lacks ``query`` or has a bad ``filters`` or ``count`` is an
    :class:`InputError` naming the file and line. Lines without the ``by`` field (or with null)
    are an error listing their line numbers, unless ``by_missing`` names the stratum they go in:
    they are never dropped without a word.
    """
    p = Path(path)
    name = str(p)
    out: list[LogEntry] = []
    missing: list[int] = []
    fields: set[str] = set()
    for number, record in json_lines(p):
        where = f"line {number}"
        query, filters = logged_question(record, name, where)
        count = record.get("count", 1)
        if count is None:
            count = 1
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InputError(name, where, f"count must be an integer >= 1 (how many times it was asked), got "
                                          f"{brief_repr(count)}")
        stratum = ALL
        if by is not None and len(fields) < 100:
            fields.update(str(key) for key in record)
        if by is not None:
            found, value = _field(record, by)
            if not found or value is None:
                missing.append(number)
                stratum = by_missing or ""
            else:
                stratum = _stratum_value(value, by, name, where)
        text = query if keep_pii else redact(query, redacted)
        out.append(LogEntry(number, text, filters or None, stratum, count))
    if not out:
        raise InputError(name, None, "no questions found (an empty log)")
    if missing and by_missing is None and len(missing) == len(out):  # a typo, most likely: say what the lines hold
        import difflib

        close = difflib.get_close_matches(str(by), sorted(fields), n=1)
        raise InputError(name, None, f"no line has the --by field {by!r}"
                                     + (f"; did you mean {close[0]!r}?" if close else
                                        f"; the lines have {', '.join(sorted(fields)[:12])}"))
    if missing and by_missing is None:
        shown = ", ".join(str(n) for n in missing[:20]) + (f" … and {len(missing) - 20} more" if len(missing) > 20
                                                          else "")
        verb = "has" if len(missing) == 1 else "have"
        raise InputError(name, None, f"{counted(len(missing), 'line')} of {len(out)} {verb} no --by field {by!r} (or "
                                     f"null): line{'s' if len(missing) > 1 else ''} {shown}; add the field, or pass "
                                     "--by-missing NAME to sample them as a stratum of their own")
    return out


# ------------------------------------------------------------------------ deduplication


@dataclass
class Question:
    """One distinct question: its most asked form, the lines merged into it, and their total count."""

    query: str
    key: str  # the normalised form
    filters: dict[str, Any] | None
    stratum: str
    line: int
    count: int
    lines: list[int] = field(default_factory=list)
    forms: int = 1  # distinct normalised forms merged (near-duplicates)

    @property
    def qid(self) -> str:
        payload = json.dumps([self.key, self.filters], sort_keys=True, ensure_ascii=False)
        return "log-" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:12]


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def token_set(text: str) -> frozenset[str]:
    """Words, and character bigrams for CJK (single characters say little about a question)."""
    toks = tokens(text)
    out: set[str] = set()
    run: list[str] = []
    for t in [*toks, ""]:
        if len(t) == 1 and _CJK_RUN.match(t):
            run.append(t)
            continue
        if run:
            out.update([a + b for a, b in zip(run, run[1:])] if len(run) > 1 else run)
            run = []
        if t:
            out.add(t)
    return frozenset(out)


def _filters_key(filters: dict[str, Any] | None) -> str:
    return json.dumps(filters, sort_keys=True, ensure_ascii=False)


def deduplicate(entries: Sequence[LogEntry], near: float | None = DEFAULT_NEAR) -> tuple[list[Question], int, int]:
    """Distinct questions, with the number of exact and near duplicates merged.

    Exact: the same normalised text and filters. Near: Jaccard overlap of token sets at least
    ``near`` (None turns it off), same filters; the most asked question absorbs the others
    (ties: by text, so the order of the log's lines does not matter). A question takes the
    wording asked most, and the stratum that wording was asked in most. Candidates are found by
    prefix filtering (only questions sharing one of the rarest tokens can reach the threshold), so
    a large log is not compared pairwise.
    """
    exact: dict[tuple[str, str], Question] = {}
    # raw form -> stratum -> count, to pick the most asked wording and the stratum it was asked in most
    forms: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    duplicates = 0
    for e in entries:
        key = normalize(e.query) or e.query.strip().casefold()
        k = (key, _filters_key(e.filters))
        q = exact.get(k)
        if q is None:
            q = exact[k] = Question(e.query, key, e.filters, e.stratum, e.line, e.count, [e.line])
            forms[k] = {}
        else:
            duplicates += 1
            q.count += e.count
            q.lines.append(e.line)
            q.line = min(q.line, e.line)
        strata = forms[k].setdefault(e.query, {})
        strata[e.stratum] = strata.get(e.stratum, 0) + e.count
    for k, q in exact.items():  # ties by text, not by line: the order of the log's lines changes nothing
        totals = {form: sum(strata.values()) for form, strata in forms[k].items()}
        q.query = min(totals, key=lambda form: (-totals[form], form))
        strata = forms[k][q.query]
        q.stratum = min(strata, key=lambda stratum: (-strata[stratum], stratum))
    ordered = sorted(exact.values(), key=lambda q: (-q.count, q.key, _filters_key(q.filters)))
    if near is None:
        return sorted(ordered, key=lambda q: q.line), duplicates, 0
    sets = [token_set(q.key) for q in ordered]
    frequency: dict[str, int] = {}
    for s in sets:
        for t in s:
            frequency[t] = frequency.get(t, 0) + 1
    # (filters, token, size) -> kept questions of that many tokens with the token in their prefix: a set
    # of size m can reach the threshold with one of size n only when near * n <= m <= n / near
    index: dict[tuple[str, str, int], list[int]] = {}
    kept: list[int] = []
    merged = 0
    for i, q in enumerate(ordered):
        s = sets[i]
        fkey = _filters_key(q.filters)
        if not s:
            kept.append(i)
            continue
        prefix = sorted(s, key=lambda t: (frequency[t], t))[:len(s) - ceil(near * len(s) - 1e-9) + 1]
        sizes = range(ceil(near * len(s) - 1e-9), floor(len(s) / near + 1e-9) + 1)
        target = None
        seen: set[int] = set()
        for t, size in ((t, size) for t in prefix for size in sizes):
            for j in index.get((fkey, t, size), ()):
                if j in seen:
                    continue
                seen.add(j)
                other = sets[j]
                if len(s & other) >= near * len(s | other) - 1e-9:
                    target = j if target is None else min(target, j)
        if target is not None:
            into = ordered[target]
            into.count += q.count
            into.lines.extend(q.lines)
            into.forms += q.forms
            into.line = min(into.line, q.line)
            merged += 1
            continue
        kept.append(i)
        for t in prefix:
            index.setdefault((fkey, t, len(s)), []).append(i)
    return sorted((ordered[i] for i in kept), key=lambda q: q.line), duplicates, merged


# ----------------------------------------------------------------------------- sampling


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """How many of ``n`` each stratum gets: proportional to its size (largest remainders, ties by
    name), at least one per non-empty stratum when ``n`` allows, never more than it holds."""
    alloc = {s: 0 for s in sizes}
    strata = sorted(s for s, size in sizes.items() if size > 0)
    total = sum(sizes[s] for s in strata)
    if n >= total:
        return {s: sizes[s] for s in sizes}
    if n < len(strata):  # fewer questions than strata: the largest strata, one each
        for s in sorted(strata, key=lambda s: (-sizes[s], s))[:n]:
            alloc[s] = 1
        return alloc
    ideal = {s: n * sizes[s] / total for s in strata}
    for s in strata:
        alloc[s] = min(sizes[s], max(1, floor(ideal[s])))
    while sum(alloc.values()) < n:
        s = min((s for s in strata if alloc[s] < sizes[s]), key=lambda s: (alloc[s] - ideal[s], s))
        alloc[s] += 1
    while sum(alloc.values()) > n:  # the minimum of one pushed past n: take from the most over-served
        s = min((s for s in strata if alloc[s] > 1), key=lambda s: (ideal[s] - alloc[s], s))
        alloc[s] -= 1
    return alloc


@dataclass
class Draft:
    """A drawn sample and how it was drawn (the draft file's ``_meta``)."""

    questions: list[Question]
    meta: dict[str, Any]

    def records(self) -> list[dict[str, Any]]:
        """The draft's question lines, in the order written."""
        by = self.meta.get("by")
        out = []
        for q in self.questions:
            record: dict[str, Any] = {"qid": q.qid, "query": q.query, "source": "log"}
            if by is not None:
                record["tags"] = [f"{by}={q.stratum}"]
            if q.filters:
                record["filters"] = q.filters
            record["candidates"] = []
            record["log"] = {"count": q.count, "line": q.line, "lines": len(q.lines), "forms": q.forms}
            out.append(record)
        return out


def sample_log(path: str | Path, n: int, *, by: str | None = None, seed: int = 0, by_missing: str | None = None,
               near: float | None = DEFAULT_NEAR, keep_pii: bool = False) -> Draft:
    """Read, redact, deduplicate and sample a query log (see the module's docstring)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise RagMetricsError(f"--n must be an integer >= 1, got {n!r}")
    if near is not None and not 0 < near <= 1.0:
        raise RagMetricsError(f"--near must be in (0, 1] (1 merges only questions with the same words), got {near!r}")
    if by_missing is not None and not by_missing.strip():
        raise RagMetricsError("--by-missing needs a stratum name, e.g. --by-missing other")
    if by_missing is not None and by is None:
        raise RagMetricsError("--by-missing names the stratum of lines without the --by field: give --by FIELD too")
    redacted: dict[str, int] = {kind: 0 for kind in PII_KINDS}
    entries = read_log(path, by, by_missing, keep_pii=keep_pii, redacted=redacted)
    questions, exact, merged = deduplicate(entries, near)
    lines_in: dict[str, int] = {}
    for e in entries:
        lines_in[e.stratum] = lines_in.get(e.stratum, 0) + 1
    groups: dict[str, list[Question]] = {}
    for q in questions:
        groups.setdefault(q.stratum, []).append(q)
    alloc = allocate({s: len(groups.get(s, ())) for s in lines_in}, n)
    chosen: list[Question] = []
    for stratum in sorted(groups):
        members = sorted(groups[stratum], key=lambda q: q.qid)  # drawn by id: the log's order changes nothing
        picked = random.Random(f"{seed}\0{stratum}").sample(range(len(members)), alloc[stratum])
        chosen.extend(sorted((members[i] for i in picked), key=lambda q: q.line))
    qids: dict[str, Question] = {}
    for q in chosen:  # a hash collision between two distinct questions: vanishingly rare, never silent
        if q.qid in qids:
            raise RagMetricsError(f"two questions share the id {q.qid}: {q.query!r} and {qids[q.qid].query!r}")
        qids[q.qid] = q
    meta = {
        "kind": DRAFT_KIND,
        "version": DRAFT_VERSION,
        "source": "log",
        "log": str(path),
        "seed": seed,
        "n": n,
        "by": by,
        "by_missing": by_missing,
        "lines": len(entries),
        "questions": len(questions),
        "sampled": len(chosen),
        "duplicates": {"exact": exact, "near": merged, "near_threshold": near},
        "strata": {s: {"lines": lines_in[s], "questions": len(groups.get(s, ())), "sampled": alloc[s]}
                   for s in sorted(lines_in)},
        "pii": "kept" if keep_pii else "redacted",
        "redacted": None if keep_pii else redacted,
    }
    return Draft(chosen, meta)


def write_draft(draft: Draft, out: str | Path, *, force: bool = False) -> Path:
    """Write the draft (UTF-8 JSONL: ``_meta``, then one question a line) atomically; an existing
    file is refused unless ``force``, and the log itself always."""
    path = Path(out)
    check_output(path, inputs=[draft.meta["log"]], force=force, example="draft.jsonl")
    text = "".join(dumps_line(line) + "\n" for line in [{"_meta": draft.meta}, *draft.records()])
    atomic_write_text(path, text)
    return path


def draft_summary(draft: Draft) -> str:
    """What was read, merged, redacted and drawn, per stratum, for the terminal."""
    m = draft.meta
    dup = m["duplicates"]
    near = f"{dup['near']} near (token overlap >= {dup['near_threshold']})" if dup["near_threshold"] is not None \
        else "near-duplicates not merged"
    lines = [
        f"{counted(m['lines'], 'log line')} -> {counted(m['questions'], 'distinct question')} "
        f"({counted(dup['exact'], 'exact duplicate')}, {near}); sampled {m['sampled']} of --n {m['n']}, "
        f"seed {m['seed']}"
        + (f", stratified by {m['by']!r}:" if m["by"] else ":"),
        "",
        markdown_table(["stratum", "log lines", "distinct", "sampled"],
                       [[s, v["lines"], v["questions"], v["sampled"]] for s, v in m["strata"].items()]),
        "",
    ]
    if m["sampled"] < m["n"]:
        lines.append(f"note: only {counted(m['sampled'], 'distinct question')} to draw from, fewer than --n {m['n']}: "
                     "all taken.")
    if m["by_missing"] is not None and m["by_missing"] in m["strata"]:
        lines.append(f"note: {counted(m['strata'][m['by_missing']]['lines'], 'line')} without {m['by']!r} "
                     f"sampled as the stratum {m['by_missing']!r} (--by-missing).")
    if m["pii"] == "kept":
        lines.append("Personal data kept as logged (--keep-pii): check the draft before sharing it.")
    else:
        counts = m["redacted"]
        total = sum(counts.values())
        lines.append(f"Redacted {counted(total, 'piece')} of personal data from the log's questions"
                     + (": " + ", ".join(f"{kind} {counts[kind]}" for kind in PII_KINDS) if total else "")
                     + " (--keep-pii keeps them).")
    return "\n".join(lines)
