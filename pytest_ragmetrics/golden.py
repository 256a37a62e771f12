"""Golden sets: load, validate and hold questions with graded judgments.

Three on-disk formats load into one model (:class:`GoldenSet` of :class:`Query`):

- YAML list (one mapping per question): ``id``, ``question``, ``gold_chunks``
  (a list of document ids, grade 1 each, or a mapping id -> grade), optional ``tags``,
  ``filters`` (a mapping passed to the retriever as ``search(query, k, filters=...)``) and
  ``scope`` (the metadata every returned document must match; one outside it is a leak).
- JSONL, one question per line: ``qid``, ``query``, optional ``mode`` (becomes a
  tag) and ``tags``, ``filters``, ``scope``, ``candidates: [{doc_id, chunk, rel, note}]``. A document's
  grade is the highest ``rel`` among its candidates; ``rel: 0`` is a judged
  non-relevant document.
- A folder with ``queries.jsonl`` (``qid``/``query`` or BEIR's ``_id``/``text``)
  and qrels (``qrels.tsv``, BEIR's ``qrels/test.tsv`` or a TREC qrels file), or the
  path of a qrels file whose folder holds ``queries.jsonl``. Queries without any
  judgment in the qrels are left out and listed in :attr:`GoldenSet.skipped`
  (a BEIR queries file covers every split; its qrels only one).

Validation happens before any retrieval and stops at the first problem with an
:class:`~pytest_ragmetrics.InputError` naming the file, the record and the reason.
Files are parsed, never executed: YAML goes through ``yaml.SafeLoader``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from pytest_ragmetrics.errors import InputError, brief_repr, listed
from pytest_ragmetrics.files import check_line_endings, check_no_bom, json_lines, read_text, split_columns, split_lines

__all__ = ["Query", "GoldenSet", "by_grade", "check_date", "check_mapping", "load_golden", "load_qrels", "MAX_GRADE",
           "JUDGMENTS", "check_judgments", "SOURCES", "DEFAULT_SOURCE", "check_source"]

#: Highest grade accepted. Real scales are 0-3 or so; beyond this, the exponential
#: gain 2^g - 1 overflows a float (2^1024), so a larger number is a typo, not a grade.
MAX_GRADE = 1000

#: Where a question came from, each with its bias: sampled from query ``log``s (what users ask, skewed
#: to the frequent), ``curated`` by hand (what the team thought of), ``harvested`` from failures of
#: past runs (``ragmetrics harvest``: over-fits known problems), or a hand-made ``variant`` of another.
SOURCES = ("log", "curated", "harvested", "variant")
#: A record without ``source`` was written by hand.
DEFAULT_SOURCE = "curated"


def by_grade(judgments: Mapping[str, int], relevance_level: int = 0) -> list[tuple[str, int]]:
    """(document, grade) pairs graded at least ``relevance_level``, best grade first, ties
    by id: one order, so every report and pool lists the same gold the same way."""
    return sorted(((d, g) for d, g in judgments.items() if g >= relevance_level), key=lambda p: (-p[1], p[0]))


@dataclass(frozen=True)
class Query:
    """One golden question: its id, text, graded judgments (doc -> grade) and tags."""

    qid: str
    text: str
    judgments: Mapping[str, int]
    tags: tuple[str, ...] = ()
    #: when the record was judged (``judged_at``): the date of each judgment without one of its own
    judged_at: _dt.date | None = None
    #: document -> when that judgment was made, for judgments dated on their own (they win over the record's)
    judged_dates: Mapping[str, _dt.date] = field(default_factory=dict)

    def judgment_dates(self) -> dict[str, _dt.date | None]:
        """Each judged document's date: its own, else the record's, else None (undated)."""
        return {doc: self.judged_dates.get(doc, self.judged_at) for doc in self.judgments}
    #: False for a question the corpus does not answer (``answerable: false``): it is scored by
    #: false retrieval (see :mod:`pytest_ragmetrics.unanswerable`), outside every other mean
    answerable: bool = True
    #: where the question came from (``source``, one of :data:`SOURCES`); not a judgment, so it
    #: changes no digest: re-labelling a question's origin does not invalidate a baseline
    source: str = DEFAULT_SOURCE
    #: passed to the retriever as ``search(query, k, filters=...)`` (None: called as ``search(query, k)``)
    filters: Mapping[str, Any] | None = None
    #: the metadata every returned document must match (``{tenant: acme}``); one outside it is a leak
    scope: Mapping[str, Any] | None = None

    def n_relevant(self, relevance_level: int = 1) -> int:
        return sum(1 for g in self.judgments.values() if g >= relevance_level)

    def gold(self, relevance_level: int = 1) -> list[tuple[str, int]]:
        """Relevant (document, grade) pairs in the order reports list gold: see :func:`by_grade`."""
        return by_grade(self.judgments, relevance_level)

    def relevant(self, relevance_level: int = 1) -> list[str]:
        """Relevant document ids, best grade first (ties by id), for reports."""
        return [d for d, _ in self.gold(relevance_level)]

    def judgments_digest(self) -> str:
        """A short hash of this query's text, judgments and filters, to spot changed labels (a scope changes
        no number, so it is left out)."""
        payload = json.dumps([self.text, sorted(self.judgments.items()), *self._hashed_extras()], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    def _hashed_extras(self) -> list[Any]:
        """What hashes add for an unanswerable question and for filters (nothing for the others, so
        their digests stay as they were): flipping the flag, or changing the filters the retriever is
        searched with, changes the query's digest."""
        extra: list[Any] = [] if self.answerable else ["answerable: false"]
        if self.filters:
            extra.append(["filters", sorted(self.filters.items())])
        return extra


@dataclass(frozen=True)
class GoldenSet:
    """An ordered, validated collection of golden queries."""

    source: str
    queries: tuple[Query, ...]
    skipped: tuple[str, ...] = field(default=())
    #: "closed" (unlisted documents are not relevant) or "pooled" (unlisted documents are unjudged)
    judgments: str = "closed"
    #: where ``judgments`` came from, for the report header ("golden.jsonl _meta", "default for YAML", ...)
    judgments_from: str = "default"

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {q.qid: q for q in self.queries})

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[Query]:
        return iter(self.queries)

    def __getitem__(self, qid: str) -> Query:
        return self._by_id[qid]  # type: ignore[attr-defined]

    def __contains__(self, qid: object) -> bool:
        return qid in self._by_id  # type: ignore[attr-defined]

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        return {q.qid: dict(q.judgments) for q in self.queries}

    def unscorable(self, relevance_level: int = 1) -> list[str]:
        """Queries with no document at or above the relevance level (never scored as 0)."""
        return [q.qid for q in self.queries if q.answerable and q.n_relevant(relevance_level) == 0]

    def unanswerable(self) -> list[str]:
        """Questions declared ``answerable: false``: scored by false retrieval, not by the means."""
        return [q.qid for q in self.queries if not q.answerable]

    def tags(self) -> list[str]:
        return sorted({t for q in self.queries for t in q.tags})

    def filtered(self) -> list[str]:
        """Queries with ``filters``: the retriever must accept ``search(query, k, filters=...)``."""
        return [q.qid for q in self.queries if q.filters]

    def scoped(self) -> list[str]:
        """Queries with a ``scope``: every document they return is checked against it (the leak gate)."""
        return [q.qid for q in self.queries if q.scope]
    def sources(self) -> dict[str, int]:
        """How many questions came from each source, in the order of :data:`SOURCES` (absent ones left out)."""
        counts = {s: sum(1 for q in self.queries if q.source == s) for s in SOURCES}
        return {s: n for s, n in counts.items() if n}

    def subset(self, qids: list[str] | set[str]) -> GoldenSet:
        keep = set(qids)
        return GoldenSet(self.source, tuple(q for q in self.queries if q.qid in keep), self.skipped,
                         self.judgments, self.judgments_from)

    def fingerprint(self) -> str:
        """sha256 over every query's id, text and judgments (tags excluded: they do not
        change a number, so retagging does not invalidate a baseline)."""
        h = hashlib.sha256()
        for q in sorted(self.queries, key=lambda q: q.qid):
            h.update(json.dumps([q.qid, q.text, sorted(q.judgments.items()), *q._hashed_extras()],
                                ensure_ascii=False).encode())
            h.update(b"\n")
        return h.hexdigest()


# --------------------------------------------------------------------------- checks


def _check_id(value: Any, path: str, where: str, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(path, where, f"{what} must be a string, got {type(value).__name__} "
                                      f"{brief_repr(value)} (quote it)")
    if not value.strip():
        raise InputError(path, where, f"{what} is empty")
    return value


def _required_id(record: dict[str, Any], fields: tuple[str, ...], path: str, where: str) -> str:
    """Check that a question record has every field in ``fields`` and return its id
    (the first field), so a missing field is named before any value is read."""
    for key in fields:
        if key not in record:
            raise InputError(path, where, f"missing field {key!r}")
    return _check_id(record[fields[0]], path, where, fields[0])


def _check_grade(value: Any, path: str, where: str, doc: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(path, where, f"grade of {brief_repr(doc)} must be an integer >= 0, got {brief_repr(value)}")
    if value < 0:
        raise InputError(path, where, f"grade of {brief_repr(doc)} is {value}; grades must be integers >= 0 (0 = "
                                      "judged not relevant)")
    if value > MAX_GRADE:
        raise InputError(path, where, f"grade of {brief_repr(doc)} is {brief_repr(value)}; grades above {MAX_GRADE} "
                                      "are not supported (the exponential nDCG gain 2^g - 1 would overflow)")
    return value


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def check_date(value: Any, path: str, where: str, what: str = "judged_at",
               today: _dt.date | None = None) -> _dt.date:
    """A ``judged_at``: an ISO date (``2026-03-01``; a full ISO time is kept as its date; YAML's
    unquoted dates arrive as dates). A date after today (UTC, one day allowed for time zones) is a
    typo: a label from the future would never go stale."""
    if isinstance(value, _dt.datetime):  # YAML's unquoted timestamps: a zone-aware one counts in UTC
        day = (value.astimezone(_dt.timezone.utc) if value.tzinfo else value).date()
    elif isinstance(value, _dt.date):
        day = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            if _ISO_DATE.fullmatch(text):
                day = _dt.date.fromisoformat(text)
            elif _ISO_DATE.match(text) and text[10:11] in ("T", " "):
                moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
                day = (moment.astimezone(_dt.timezone.utc) if moment.tzinfo else moment).date()
            else:
                raise ValueError(text)
        except ValueError:
            raise InputError(path, where, f"{what} {brief_repr(value)} is not a date; write an ISO date "
                                          "such as 2026-03-01") from None
    else:
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "__line__"}  # the loader's own bookkeeping
        raise InputError(path, where, f"{what} must be an ISO date such as 2026-03-01, got "
                                      f"{type(value).__name__} {brief_repr(value)}")
    latest = (today or _dt.datetime.now(_dt.timezone.utc).date()) + _dt.timedelta(days=1)
    if day > latest:
        raise InputError(path, where, f"{what} {day.isoformat()} is in the future (today is "
                                      f"{(latest - _dt.timedelta(days=1)).isoformat()} UTC); a label is dated "
                                      "when it was judged")
    return day


def _check_tags(value: Any, path: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise InputError(path, where, f"tags must be a list of strings, got {type(value).__name__}")
    tags: list[str] = []
    for tag in value:
        tags.append(_check_id(tag, path, where, "a tag"))
    return tuple(dict.fromkeys(tags))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool)) and not (
        isinstance(value, float) and value != value)


def check_mapping(value: Any, path: str, where: str, what: str) -> dict[str, Any] | None:
    """A record's ``filters`` or ``scope``: a mapping of metadata keys to a value or a list of values
    (any of them), so it can be sent to a retriever, matched against a document and hashed alike on
    every run. None or empty ``filters`` is no filter at all; an empty ``scope`` is refused, since
    it would check nothing. Values are copied, so a YAML anchor shared by a record's filters and
    scope is two values: a retriever that edits its filters cannot widen the scope."""
    if value is None:
        return None
    value = copy.deepcopy(value)
    if not isinstance(value, dict):
        raise InputError(path, where, f"{what} must be a mapping of metadata keys to values, such as "
                                      f"{{tenant: acme}}; got {type(value).__name__} {brief_repr(value)}")
    value = {k: v for k, v in value.items() if k != "__line__"}  # the YAML loader's own bookkeeping
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            raise InputError(path, where, f"{what}: key {brief_repr(key)} must be a non-empty string")
        if isinstance(item, dict):
            item = {k: v for k, v in item.items() if k != "__line__"}
        items = item if isinstance(item, list) else [item]
        if not items or not all(_scalar(v) and v is not None for v in items):
            raise InputError(path, where, f"{what}: {key} is {brief_repr(item)}; expected a string, number or "
                                          "boolean, or a non-empty list of them (any of)")
    if not value and what == "scope":
        raise InputError(path, where, "scope is empty, so it would check nothing; name the metadata every "
                                      "returned document must match, such as {tenant: acme}, or remove it")
    return value or None


def check_source(value: Any, path: str, where: str | None) -> str:
    """A record's ``source``: one of :data:`SOURCES` (absent or null: :data:`DEFAULT_SOURCE`)."""
    if value is None:
        return DEFAULT_SOURCE
    if value not in SOURCES:
        raise InputError(path, where, f"source must be one of {', '.join(SOURCES)}, got {brief_repr(value)} "
                                      "(where the question came from; the default is curated)")
    return value


def _finish(path: str, queries: list[tuple[Query, str]], skipped: tuple[str, ...] = (),
            id_separator: str | None = None, judgments: tuple[str, str] = ("closed", "default")) -> GoldenSet:
    if not queries:
        raise InputError(path, None, "the golden set holds no questions")
    seen: dict[str, str] = {}
    for query, where in queries:
        if query.qid in seen:
            raise InputError(path, where, f"duplicate query id {brief_repr(query.qid)} (first at {seen[query.qid]})")
        seen[query.qid] = where
        if id_separator:
            _check_separator(query, id_separator, path, where)
    return GoldenSet(path, tuple(q for q, _ in queries), skipped, *judgments)


#: How a golden set was judged: ``closed`` (what it does not list is not relevant, trec_eval's
#: meaning) or ``pooled`` (what it does not list was never judged).
JUDGMENTS = ("closed", "pooled")


def check_judgments(value: Any, path: str, where: str | None) -> str:
    """A ``judgments:`` declaration: ``closed`` or ``pooled``, anything else an error naming the record."""
    if value not in JUDGMENTS:
        raise InputError(path, where, f"must be 'closed' or 'pooled', got {brief_repr(value)} (closed: "
                                      "documents the set does not list are not relevant; pooled: they are unjudged)")
    return value


def _check_separator(query: Query, separator: str, path: str, where: str) -> None:
    """A gold id holding the id separator can never match: every ranked id is cut at
    the separator before it is judged, so the query would score 0 without a word."""
    for doc in query.judgments:
        if separator in doc:
            raise InputError(
                path, where,
                f"query {brief_repr(query.qid)}: gold document {brief_repr(doc)} contains the id separator "
                f"{separator!r}, so no retrieved id can ever match it (ranked ids are cut at the first "
                f"{separator!r} and judged as documents). If the labels name passages or chunks, judge ids as "
                "given with rag_id_separator = none (--rag-id-separator none); if they name documents, set "
                "rag_id_separator to a separator no document id contains",
            )


# ---------------------------------------------------------------------------- YAML


def _yaml_loader() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster

    class LineLoader(base):  # type: ignore[misc,valid-type]
        """A safe loader that records each mapping's line and rejects duplicate keys."""

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        keys: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, (str, int)) and key in keys:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {brief_repr(key)}", key_node.start_mark
                )
            keys.add(key) if isinstance(key, (str, int)) else None
        mapping = yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=True)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping

    def construct_timestamp(loader: Any, node: Any) -> Any:
        """An unquoted date YAML cannot build (``2026-02-30``) stays text, so the record that holds
        it is named (a ``judged_at`` is then refused as "not a date")."""
        try:
            return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
        except ValueError:
            return loader.construct_scalar(node)

    LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    LineLoader.add_constructor("tag:yaml.org,2002:timestamp", construct_timestamp)
    return LineLoader


def _load_yaml(path: Path, id_separator: str | None = None) -> GoldenSet:
    import yaml

    name = str(path)
    text = read_text(path)
    try:
        data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark else None
        problem = str(exc.problem or exc)
        if "tag:yaml.org,2002:merge" in problem:
            problem = "merge keys (<<) are not supported; write the fields out"
        elif "could not determine a constructor" in problem:
            problem += " (a golden set is plain data: tags that build Python objects are refused, never run)"
        raise InputError(name, where, f"invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, other controls)
        line = text[: exc.position].count("\n") + 1
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        raise InputError(name, f"line {line}", f"invalid YAML: character #x{code:04x} is not allowed "
                                               f"({exc.reason})") from None
    except yaml.YAMLError as exc:
        raise InputError(name, None, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InputError(name, None, "invalid YAML: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise InputError(name, None, f"invalid YAML: {exc}") from None
    if data is None:
        raise InputError(name, None, "the file is empty; expected a YAML list of questions")
    judgments = ("closed", "default for YAML gold_chunks")
    if isinstance(data, dict) and isinstance(data.get("queries"), list):
        data.pop("__line__", None)
        if "judgments" in data:
            judgments = (check_judgments(data["judgments"], name, "top-level key 'judgments'"),
                         f"{path.name} judgments:")
        data = data["queries"]
    if not isinstance(data, list):
        raise InputError(name, None, f"expected a YAML list of questions, got a {type(data).__name__}")
    queries: list[tuple[Query, str]] = []
    for number, record in enumerate(data, start=1):
        if not isinstance(record, dict):
            raise InputError(name, f"record {number}", "expected a mapping with id, question, gold_chunks; got "
                                                       f"{brief_repr(record)}")
        line = record.pop("__line__", None)
        where = f"record {number} (line {line})"
        answerable = _check_answerable(record, name, where, "id")
        qid = _required_id(record, ("id", "question", "gold_chunks") if answerable else ("id", "question"), name, where)
        where = f"record {number} (line {line}, id {brief_repr(qid)})"
        _refuse_unknown_keys(record, _YAML_KEYS, name, where)
        question = _check_id(record["question"], name, where, "question")
        dates: dict[str, _dt.date] = {}
        if answerable:
            gold = _yaml_gold(record["gold_chunks"], name, where, dates)
        else:
            given = record.get("gold_chunks")
            gold = {} if given in (None, [], {}) else _yaml_gold(given, name, where, dates)
            _no_gold(gold, name, where, "gold_chunks")
        tags = _check_tags(record.get("tags"), name, where)
        judged_at = check_date(record["judged_at"], name, where) if record.get("judged_at") is not None else None
        source = check_source(record.get("source"), name, where)
        filters = check_mapping(record.get("filters"), name, where, "filters")
        scope = check_mapping(record.get("scope"), name, where, "scope")
        queries.append((Query(qid, question, gold, tags, judged_at, dates, answerable, source, filters, scope),
                        where))
    return _finish(name, queries, id_separator=id_separator, judgments=judgments)


#: The keys of a YAML golden record; anything else is a typo (``tag:``) or a question cut short
#: by YAML itself (an unquoted ``?`` or ``:`` in a flow mapping starts a new key).
_YAML_KEYS = ("id", "question", "gold_chunks", "tags", "judged_at", "answerable", "source", "filters", "scope")


def _check_answerable(record: dict[str, Any], path: str, where: str, id_field: str) -> bool:
    """``answerable`` (default true) must be a bool: ``"no"`` or ``0`` would read as a typo's guess."""
    value = record.get("answerable", True)
    if not isinstance(value, bool):
        if isinstance(record.get(id_field), str):
            where = f"{where[:-1]}, {id_field} {brief_repr(record[id_field])})" if where.endswith(")") \
                else f"{where} ({id_field} {brief_repr(record[id_field])})"
        raise InputError(path, where, f"answerable must be true or false, got {brief_repr(value)}")
    return value


def _no_gold(judgments: Mapping[str, int], path: str, where: str, field_name: str) -> None:
    """A question marked unanswerable has no relevant document: a positive grade contradicts it
    (judgments of grade 0, "judged not relevant", are fine)."""
    gold = [d for d, g in judgments.items() if g > 0]
    if gold:
        raise InputError(path, where, f"answerable: false, but {field_name} grades "
                                      f"{listed([brief_repr(d) for d in gold])} relevant; a question "
                                      "with no answer has no gold document (drop the gold, or the answerable flag)")


def _refuse_unknown_keys(record: dict[str, Any], known: Sequence[str], path: str, where: str) -> None:
    import difflib

    for key in record:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else (
            "; if it is part of the question, quote the question (in a {...} mapping YAML ends plain text at a "
            "comma, ': ' or ' ?')")
        raise InputError(path, where, f"unknown key {brief_repr(key)} (a record has {', '.join(known)}){hint}")


def _yaml_gold(gold: Any, path: str, where: str, dates: dict[str, _dt.date] | None = None) -> dict[str, int]:
    if isinstance(gold, dict):
        gold.pop("__line__", None)
        if not gold:
            raise InputError(path, where, "gold_chunks is empty; a question needs at least one gold document")
        judgments: dict[str, int] = {}
        for doc, grade in gold.items():
            doc = _check_id(doc, path, where, "a gold document id")
            if isinstance(grade, dict):  # {grade: 2, judged_at: 2026-03-01}: one judgment dated on its own
                grade.pop("__line__", None)
                for key in grade:
                    if key not in ("grade", "judged_at"):
                        raise InputError(path, where, f"gold document {brief_repr(doc)}: unknown key "
                                                      f"{brief_repr(key)} (a judgment has grade and judged_at)")
                if "grade" not in grade:
                    raise InputError(path, where, f"gold document {brief_repr(doc)}: missing grade")
                if grade.get("judged_at") is not None and dates is not None:
                    dates[doc] = check_date(grade["judged_at"], path, where, f"judged_at of {brief_repr(doc)}")
                grade = grade["grade"]
            judgments[doc] = _check_grade(grade, path, where, doc)
        return judgments
    if isinstance(gold, list):
        if not gold:
            raise InputError(path, where, "gold_chunks is empty; a question needs at least one gold document")
        judgments = {}
        for doc in gold:
            doc = _check_id(doc, path, where, "a gold document id")
            if doc in judgments:
                raise InputError(path, where, f"gold document {brief_repr(doc)} is listed twice")
            judgments[doc] = 1
        return judgments
    if gold is None:
        raise InputError(path, where, "gold_chunks is empty; a question needs at least one gold document")
    raise InputError(path, where, "gold_chunks must be a list of ids or a mapping id -> grade, got "
                                  f"{type(gold).__name__}")


# ---------------------------------------------------------------------------- JSONL


def _load_jsonl(path: Path, id_separator: str | None = None) -> GoldenSet:
    name = str(path)
    queries: list[tuple[Query, str]] = []
    mode = ("pooled", "default for JSONL candidates")
    for number, record in json_lines(path):
        where = f"line {number}"
        if not isinstance(record, dict):
            raise InputError(name, where, "expected a JSON object with qid, query, candidates")
        if "_meta" in record and not queries:  # how a pool or an annotator's file was made: not a question
            meta = record["_meta"]
            if isinstance(meta, dict) and "judgments" in meta:
                mode = (check_judgments(meta["judgments"], name, f"{where} (_meta.judgments)"),
                        f"{path.name} _meta.judgments")
            continue
        answerable = _check_answerable(record, name, where, "qid")
        qid = _required_id(record, ("qid", "query", "candidates") if answerable else ("qid", "query"), name, where)
        where = f"line {number} (qid {brief_repr(qid)})"
        text = _check_id(record["query"], name, where, "query")
        candidates = record.get("candidates", [])
        if not answerable and candidates is None:
            candidates = []
        if not isinstance(candidates, list) or (answerable and not candidates):
            raise InputError(name, where, "candidates must be a non-empty list of {doc_id, rel}")
        judgments: dict[str, int] = {}
        dates: dict[str, _dt.date] = {}
        for i, cand in enumerate(candidates, start=1):
            if not isinstance(cand, dict) or "doc_id" not in cand:
                raise InputError(name, where, f"candidate {i} must be an object with doc_id and rel")
            doc = _check_id(cand["doc_id"], name, where, f"candidate {i} doc_id")
            if cand.get("rel") is None:
                raise InputError(name, where, f"candidate {i} ({brief_repr(doc)}) has no rel: annotate it (0 = not "
                                              "relevant)")
            grade = _check_grade(cand["rel"], name, where, doc)
            judgments[doc] = max(grade, judgments.get(doc, 0))
            if cand.get("judged_at") is not None:  # a document judged twice: its latest judgment dates it
                day = check_date(cand["judged_at"], name, where, f"candidate {i} ({brief_repr(doc)}) judged_at")
                dates[doc] = max(day, dates.get(doc, day))
        tags = list(_check_tags(record.get("tags"), name, where))
        if record.get("mode") is not None:
            tags.insert(0, _check_id(record["mode"], name, where, "mode"))
        if not answerable:
            _no_gold(judgments, name, where, "candidates")
        judged_at = check_date(record["judged_at"], name, where) if record.get("judged_at") is not None else None
        source = check_source(record.get("source"), name, where)
        filters = check_mapping(record.get("filters"), name, where, "filters")
        scope = check_mapping(record.get("scope"), name, where, "scope")
        queries.append((Query(qid, text, judgments, tuple(dict.fromkeys(tags)), judged_at, dates, answerable, source,
                              filters, scope), where))
    return _finish(name, queries, id_separator=id_separator, judgments=mode)


# -------------------------------------------------------------------- qrels + folders

#: A qrels header line names its columns with these words (any case): ``qid doc_id rel``,
#: BEIR's ``query-id corpus-id score``, TREC's ``qid iter docno rel``. Only a first line
#: that is wholly such a header is skipped: ``query d1 1`` judges the query ``query``.
_HEADER_WORDS = {"qid", "query-id", "query_id", "queryid", "query", "topic", "topic-id", "topic_id"}
_HEADER_ITER_WORDS = {"iter", "iteration", "q0", "round"}
_HEADER_DOC_WORDS = {"doc", "docid", "doc-id", "doc_id", "docno", "document", "document-id", "document_id",
                     "corpus-id", "corpus_id", "pid", "passage-id", "passage_id"}
_HEADER_GRADE_WORDS = {"rel", "relevance", "score", "grade", "label", "judgment", "judgement", "rating"}


def _is_qrels_header(parts: list[str]) -> bool:
    words = [part.lower() for part in parts]
    if len(words) == 3:
        words.insert(1, "iter")
    return len(words) == 4 and words[0] in _HEADER_WORDS and words[1] in _HEADER_ITER_WORDS \
        and words[2] in _HEADER_DOC_WORDS and words[3] in _HEADER_GRADE_WORDS


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read qrels: TREC (``qid iter doc grade``) or 3 columns (``qid doc grade``),
    space or tab separated, with an optional header line (see :data:`_HEADER_WORDS`).
    Other whitespace (NBSP), a rank-like ``iter`` that is not ASCII, and CR line endings are
    refused, naming the line.

    A repeated (query, document) pair or a non-integer grade is an error naming the line.
    """
    path = Path(path)
    name = str(path)
    qrels: dict[str, dict[str, int]] = {}
    seen_at: dict[tuple[str, str], int] = {}
    columns: int | None = None
    text = read_text(path)
    check_no_bom(text, name)
    check_line_endings(text, name)
    for number, line in enumerate(split_lines(text), start=1):
        parts = split_columns(line, name, f"line {number}")
        if not parts:
            continue
        if columns is None and number == 1 and _is_qrels_header(parts):
            continue
        if len(parts) not in (3, 4):
            raise InputError(name, f"line {number}", "expected 3 (qid doc grade) or 4 (qid iter doc grade) columns, "
                                                     f"got {len(parts)}")
        if columns is None:
            columns = len(parts)
        elif len(parts) != columns:
            raise InputError(name, f"line {number}", f"expected {columns} columns like the lines before, got "
                                                     f"{len(parts)}")
        qid, doc, raw = (parts[0], parts[1], parts[2]) if columns == 3 else (parts[0], parts[2], parts[3])
        if columns == 4 and not parts[1].isascii():  # "１" looks like the usual 0 but is no number to any tool
            raise InputError(name, f"line {number}", f"iteration column {brief_repr(parts[1])} is not ASCII "
                                                     "(it is usually 0)")
        try:
            if not raw.isascii() or "_" in raw:  # int() would read "1_0" and fullwidth digits
                raise ValueError(raw)
            grade = int(raw)
        except ValueError:
            raise InputError(name, f"line {number}", f"grade {brief_repr(raw)} is not an integer") from None
        if grade < 0:
            raise InputError(name, f"line {number}", f"grade {grade} of {brief_repr(doc)}: grades must be integers >= "
                                                     "0 (0 = judged not relevant)")
        if grade > MAX_GRADE:
            raise InputError(name, f"line {number}", f"grade {brief_repr(grade)} of {brief_repr(doc)}: grades above "
                                                     f"{MAX_GRADE} are not supported (the exponential nDCG gain would "
                                                     "overflow)")
        key = (qid, doc)
        if key in seen_at:
            raise InputError(name, f"line {number}", f"query {brief_repr(qid)}, document {brief_repr(doc)} judged "
                                                     f"twice (first on line {seen_at[key]})")
        seen_at[key] = number
        qrels.setdefault(qid, {})[doc] = grade
    if not qrels:
        raise InputError(name, None, "no judgments found")
    return qrels


def _find_qrels(folder: Path) -> Path:
    for candidate in ("qrels.tsv", "qrels/test.tsv", "qrels.txt", "qrels"):
        p = folder / candidate
        if p.is_file():
            return p
    raise InputError(str(folder), None, "no qrels found (looked for qrels.tsv, qrels/test.tsv, qrels.txt)")


def query_fields(record: Any, name: str, where: str) -> tuple[str, str]:
    """The id and text of one queries.jsonl record (``qid``/``query`` or BEIR's ``_id``/``text``)."""
    if not isinstance(record, dict):
        raise InputError(name, where, "expected a JSON object with qid and query")
    raw_id = record.get("qid", record.get("_id"))
    raw_text = record.get("query", record.get("text"))
    if raw_id is None:
        raise InputError(name, where, "missing field 'qid' (or BEIR '_id')")
    if raw_text is None:
        raise InputError(name, where, "missing field 'query' (or BEIR 'text')")
    qid = _check_id(raw_id, name, where, "qid")
    return qid, _check_id(raw_text, name, f"{where} (qid {brief_repr(qid)})", "query")


def _load_folder(folder: Path, qrels_path: Path | None = None, id_separator: str | None = None) -> GoldenSet:
    queries_path = folder / "queries.jsonl"
    if not queries_path.is_file():
        raise InputError(str(folder), None, "no queries.jsonl in this folder")
    qrels_path = qrels_path or _find_qrels(folder)
    qrels = load_qrels(qrels_path)
    name = str(queries_path)
    texts: dict[str, tuple[str, tuple[str, ...], int, str]] = {}
    scoped: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
    for number, record in json_lines(queries_path):
        where = f"line {number}"
        qid, text = query_fields(record, name, where)
        if qid in texts:
            raise InputError(name, where, f"duplicate query id {brief_repr(qid)} (first on line {texts[qid][2]})")
        texts[qid] = (text, _check_tags(record.get("tags"), name, where), number,
                      check_source(record.get("source"), name, f"{where} (qid {brief_repr(qid)})"))
        where = f"line {number} (qid {brief_repr(qid)})"
        scoped[qid] = (check_mapping(record.get("filters"), name, where, "filters"),
                       check_mapping(record.get("scope"), name, where, "scope"))
    unknown = [qid for qid in qrels if qid not in texts]
    if unknown:
        raise InputError(str(qrels_path), None, f"{len(unknown)} judged queries are not in {queries_path.name}, e.g. "
                                                f"{brief_repr(unknown[0])}")
    queries = [
        (Query(qid, text, qrels[qid], tags, source=source, filters=scoped[qid][0], scope=scoped[qid][1]),
         f"line {number}")
        for qid, (text, tags, number, source) in texts.items()
        if qid in qrels
    ]
    skipped = tuple(qid for qid in texts if qid not in qrels)
    return _finish(str(folder), queries, skipped, id_separator, ("closed", "default for qrels"))


def load_golden(path: str | Path, id_separator: str | None = None) -> GoldenSet:
    """Load a golden set from a YAML file, a JSONL file, a collection folder, or a
    qrels file that sits next to a ``queries.jsonl``.

    With ``id_separator`` (the one ranked ids will be mapped with), a gold id that
    contains it is refused: it could never match a mapped id.
    """
    path = Path(path)
    if path.is_dir():
        return _load_folder(path, id_separator=id_separator)
    if not path.exists():
        raise InputError(str(path), None, "file not found")
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _load_yaml(path, id_separator)
    if suffix in (".jsonl", ".ndjson"):
        return _load_jsonl(path, id_separator)
    if (path.parent / "queries.jsonl").is_file():
        return _load_folder(path.parent, path, id_separator)
    raise InputError(
        str(path), None,
        "unknown golden set format: use .yaml/.yml, .jsonl, a folder with queries.jsonl + qrels, "
        "or a qrels file next to a queries.jsonl",
    )
