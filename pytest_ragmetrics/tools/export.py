"""A run artifact as a TREC run, a golden set as TREC qrels or as golden YAML.

So anyone can check the numbers with trec_eval, ranx or ir_measures: the run
keeps each query's ranking (documents after chunk mapping and dedup) in order,
written with descending scores so trec_eval's sort reproduces it exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_ragmetrics.files import loads_json, read_text, split_lines
from pytest_ragmetrics.gate.artifact import load_artifact, parse_artifact
from pytest_ragmetrics.golden import DEFAULT_SOURCE

__all__ = ["artifact_rankings", "golden_yaml", "judgments_gaps", "merge_judgments", "golden_file_text", "changed_texts",
           "merged_golden_yaml"]


def artifact_rankings(path: str | Path, text: str | None = None) -> dict[str, list[str]]:
    """Each query's ranked documents from a run artifact (``--rag-report``), in order.

    ``text`` is the file's content when the caller has read it already. The file is
    checked as every reader checks it (:mod:`pytest_ragmetrics.gate.artifact`): a
    problem names the file, the query and the field.
    """
    path = Path(path)
    data = load_artifact(path) if text is None else parse_artifact(text, str(path))
    return {qid: list(entry.get("ranking") or []) for qid, entry in data["per_query"].items()}


def golden_yaml(queries: Any) -> str:
    """Questions as entries of a golden YAML file (``id``, ``question``, ``gold_chunks``, ``tags``).

    The text is a YAML list, so it can be appended to an existing golden YAML file
    as it is (``cat new.yaml >> eval/golden.yaml``): judged annotations, or an
    adjudicated file, join the golden set without rewriting its comments. Grades
    are kept as judged, 0 included (a judged "not relevant" is part of the set);
    a question whose documents are all grade 1 gets the short list form.
    A question's ``source`` is kept when it is not the default (``curated``).
    Dates are kept (``judged_at``): on the record when all its judgments share one, else on
    each judgment that has its own (``{grade: 2, judged_at: 2026-03-01}``).
    """
    import yaml

    entries = []
    for q in queries:
        grades = dict(q.judgments)
        dates: dict[str, Any] = getattr(q, "judgment_dates", lambda: {})()
        shared = set(dates.values())
        record_date = next(iter(shared)) if len(shared) == 1 else getattr(q, "judged_at", None)
        own = {d: day for d, day in dates.items() if day is not None and day != record_date}
        gold: Any = list(grades) if grades and all(g == 1 for g in grades.values()) and not own else grades
        if own:
            gold = {d: {"grade": g, "judged_at": own[d]} if d in own else g for d, g in grades.items()}
        entry: dict[str, Any] = {"id": q.qid, "question": q.text}
        if getattr(q, "answerable", True):
            entry["gold_chunks"] = gold
        else:  # a question with no answer: its grade-0 judgments, if any, and the flag
            entry["answerable"] = False
            if grades:
                entry["gold_chunks"] = gold
        if q.tags:
            entry["tags"] = list(q.tags)
        if getattr(q, "source", DEFAULT_SOURCE) != DEFAULT_SOURCE:  # where the question came from, kept
            entry["source"] = q.source
        if record_date is not None:
            entry["judged_at"] = record_date
        _filters_and_scope(q, entry)
        entries.append(entry)
    return yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=100)


def judgments_gaps(path: str | Path) -> list[str]:
    """What an annotator's file (``ragmetrics annotate``) leaves out of its pool, as notes.

    Exporting such a file keeps what was judged; a question never graded
    disappears and an ungraded candidate counts as not relevant, so say how many.
    Empty for any other file, or when its candidates file cannot be found.
    """
    from pytest_ragmetrics.tools.candidates import file_meta, read_candidates

    p = Path(path)
    meta = file_meta(p)
    if not isinstance(meta, dict) or meta.get("kind") != "ragmetrics-judgments" or not meta.get("candidates"):
        return []
    source = Path(str(meta["candidates"]))
    found = next((c for c in (source, p.parent / source) if c.is_file()), None)
    if found is None:
        return [f"{p} was graded from {source}, which is not here, so what it leaves unjudged is not known"]
    pool = read_candidates(found)
    judged: dict[str, set[str]] = {}
    notes = 0
    for line in split_lines(read_text(p))[1:]:
        if not line.strip():
            continue
        record = loads_json(line)
        docs = judged.setdefault(str(record.get("qid")), set())
        for cand in record.get("candidates") or []:
            if cand.get("rel") is not None:
                docs.add(str(cand.get("doc_id")))
            notes += bool(str(cand.get("note") or "").strip())
    questions = [q.qid for q in pool.questions if q.candidates and not judged.get(q.qid)]
    candidates = sum(1 for q in pool.questions for c in q.candidates if c.doc_id not in judged.get(q.qid, set()))
    out = []
    empty = [q for q in pool.questions if not q.candidates]
    if empty:  # nothing to grade, so the question would vanish unseen
        shown = "; ".join(f"{q.qid} ({q.query!r})" for q in empty[:10]) + (" …" if len(empty) > 10 else "")
        out.append(f"{p}: {len(empty)} {'question' if len(empty) == 1 else 'questions'} of {found} had no "
                   f"candidates to judge and {'is' if len(empty) == 1 else 'are'} not exported: {shown}. If "
                   "nothing in the corpus answers one, add it to the golden set with `answerable: false`")
    if candidates:
        out.append(f"{p}: {len(questions)} of {len(pool.questions) - len(empty)} questions and {candidates} "
                   "candidates of "
                   f"{found} are not judged; unjudged questions are left out and unjudged candidates count as "
                   "not relevant")
    if notes:
        out.append(f"{p}: {notes} {'note is' if notes == 1 else 'notes are'} not kept in the export "
                   "(they stay in the file)")
    return out


def changed_texts(golden: Any, annotated: Any) -> list[tuple[str, str, str]]:
    """(qid, the golden set's text, the judged text) of each question both hold under other texts:
    grades made for one question are not judgments of another that took its id."""
    return [(q.qid, q.text, annotated[q.qid].text) for q in golden
            if q.qid in annotated and " ".join(q.text.split()) != " ".join(annotated[q.qid].text.split())]


def merge_judgments(golden: Any, annotated: Any) -> tuple[list[Any], list[str]]:
    """The golden set's queries with the grades of ``annotated`` (an annotator's or adjudicated
    file) merged in: a document it grades takes that grade, a question it adds is appended (with its
    ``source``: a harvested question stays harvested). A question the golden set holds keeps its own
    ``source``: judging more of its documents does not change where the question came from.
    Returns the queries and a note per grade that changed (a regrade, not a new judgment)."""
    from dataclasses import replace

    changed: list[str] = []
    merged = []
    for q in golden:
        if q.qid not in annotated:
            merged.append(q)
            continue
        extra = annotated[q.qid].judgments
        changed += [f"{q.qid}: {d} {q.judgments[d]} -> {g}" for d, g in extra.items()
                    if d in q.judgments and q.judgments[d] != g]
        found = annotated[q.qid]
        dates = {d: day for d, day in q.judgment_dates().items() if day is not None}
        dates.update({d: day for d, day in found.judgment_dates().items() if day is not None})
        grades = {**q.judgments, **extra}
        answerable = q.answerable or any(g > 0 for g in grades.values())
        if answerable != q.answerable:
            changed.append(f"{q.qid}: was marked answerable: false, but "
                           f"{', '.join(d for d, g in extra.items() if g > 0)} "
                           "graded relevant: written as answerable")
        merged.append(replace(q, judgments=grades, judged_at=None, judged_dates=dates, answerable=answerable))
    merged += [q for q in annotated if q.qid not in golden]
    return merged, changed


def _filters_and_scope(query: Any, record: dict[str, Any]) -> None:
    """A record's ``filters`` and ``scope`` written back as they were read: a rewritten golden set must
    search and check each question as the original did."""
    for key in ("filters", "scope"):
        value = getattr(query, key, None)
        if value:
            record[key] = dict(value)


def golden_file_text(queries: Any, path: str | Path, judgments: str = "pooled", as_yaml: bool | None = None) -> str:
    """A whole golden set that says how it was judged: YAML ``{judgments: ..., queries: [...]}`` for a
    ``.yaml``/``.yml`` path (or ``as_yaml``), else JSONL with a ``_meta`` line (``judgments``) and one
    question a line."""
    import json

    if as_yaml or (as_yaml is None and Path(path).suffix.lower() in (".yaml", ".yml")):
        import yaml

        entries = yaml.safe_load(golden_yaml(queries)) or []
        return yaml.safe_dump({"judgments": judgments, "queries": entries}, sort_keys=False, allow_unicode=True,
                              width=100)
    lines = [{"_meta": {"kind": "ragmetrics-golden", "judgments": judgments}}]
    for q in queries:
        record: dict[str, Any] = {"qid": q.qid, "query": q.text}
        if q.tags:
            record["tags"] = list(q.tags)
        if not q.answerable:
            record["answerable"] = False
        if q.source != DEFAULT_SOURCE:
            record["source"] = q.source
        _filters_and_scope(q, record)
        dates = q.judgment_dates()
        record["candidates"] = [{"doc_id": d, "rel": g, **({"judged_at": dates[d].isoformat()} if dates.get(d) else {})}
                                for d, g in q.judgments.items()]
        lines.append(record)
    return "".join(json.dumps(line, ensure_ascii=False, sort_keys=False) + "\n" for line in lines)


# ------------------------------------------------- a merged golden set, written over its own YAML


def merged_golden_yaml(source: str | Path, before: Any, queries: Any, judgments: str = "pooled") -> str | None:
    """The golden set ``queries`` written as the YAML file ``source`` (which held ``before``) is
    laid out: its comments and the text of every record that did not change are kept as they are,
    a changed record is rewritten field by field (keeping the comments it carries), new questions
    are appended after the last record, and the file declares ``judgments:`` (a top-level list
    becomes ``queries:`` under it, each record left where it was).

    Returns None when the file's layout cannot be kept (a flow-style or empty list, or a result
    that would not read back as ``queries``): the caller then writes the set without its comments.
    """
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    text = read_text(Path(source))
    # Round-trip mode keeps comments, key order, flow style and quotes. It builds only maps, lists
    # and scalars: a tag is kept as data, never turned into an object or run (the set was also
    # read by the safe loader of pytest_ragmetrics.golden before).
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096  # never re-fold a line the file has
    doc = rt.load(text)
    records = doc.get("queries") if isinstance(doc, CommentedMap) else doc
    if not isinstance(records, CommentedSeq) or not records or records.fa.flow_style():
        return None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    starts = [records.lc.item(i)[0] for i in range(len(records))]
    end = len(lines)
    if isinstance(doc, CommentedMap):
        keys = list(doc)
        later = keys[keys.index("queries") + 1:]
        if later:
            end = doc.lc.key(later[0])[0]
    while end > starts[-1] + 1 and lines[end - 1].strip() in ("...", "---"):
        end -= 1
    dash, content = _dash_column(lines[starts[0]]), records.lc.item(0)[1]
    rt.indent(mapping=_mapping_indent(records, content), sequence=content, offset=dash)

    def dumped(value: Any) -> str:
        out = io.StringIO()
        rt.dump(value, out)
        return out.getvalue()

    was = {q.qid: e for q, e in zip(before, _entries(before))}
    now = dict(zip((q.qid for q in queries), _entries(queries)))
    body: list[str] = []
    written: set[str] = set()
    for i, record in enumerate(records):
        span = lines[starts[i]: starts[i + 1] if i + 1 < len(records) else end]
        qid = str(record.get("id")) if isinstance(record, dict) else None
        if qid is None or qid not in now or qid in written:
            return None
        written.add(qid)
        if was.get(qid) == now[qid]:
            body += span  # unchanged: as written, comments and all
            continue
        _update(record, was.get(qid, {}), now[qid])
        body += _with_gap(dumped(CommentedSeq([record])), span)
    added = [now[q.qid] for q in queries if q.qid not in written]
    tail = [dumped(added)] if added else []
    head = lines[: starts[0]]
    rest = lines[end:]
    if isinstance(doc, CommentedMap):
        head = _declare(head, judgments, doc)
    else:
        blank = max((n + 1 for n, line in enumerate(head) if not line.strip()), default=len(head))
        head = [*head[:blank], f"judgments: {judgments}\n", "queries:\n", *head[blank:]]
    result = "".join([*head, *body, *tail, *rest])
    return result if _reads_back(result, queries, judgments) else None


def _entries(queries: Any) -> list[dict[str, Any]]:
    """Each question as the plain record :func:`golden_yaml` writes: two records are the same question
    when these are equal, whatever spelling the file used."""
    import yaml

    return list(yaml.safe_load(golden_yaml(queries)) or [])


def _dash_column(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _mapping_indent(records: Any, content: int) -> int:
    """How far the file indents a block mapping inside a record (``gold_chunks:`` then its ids)."""
    from ruamel.yaml.comments import CommentedMap

    for record in records:
        for value in (record.values() if isinstance(record, dict) else ()):
            if isinstance(value, CommentedMap) and value and not value.fa.flow_style():
                return max(2, value.lc.col - content)
    return 2


def _update(record: Any, was: dict[str, Any], now: dict[str, Any]) -> None:
    """Rewrite only the fields of ``record`` that changed between ``was`` and ``now``, in place."""
    for key in [k for k in was if k not in now]:
        record.pop(key, None)
    for key, value in now.items():
        if was.get(key) == value and key in record:
            continue
        old = record.get(key)
        if isinstance(old, dict) and isinstance(value, dict):  # one grade changed: keep the others' comments
            for doc in [d for d in old if d not in value]:
                del old[doc]
            for doc, grade in value.items():
                if old.get(doc) != grade:
                    old[doc] = grade
        elif isinstance(old, list) and isinstance(value, list) and list(old) == value[: len(old)]:
            old.extend(value[len(old):])
        else:
            record[key] = value


def _with_gap(text: str, span: list[str]) -> list[str]:
    """A rewritten record followed by the blank and comment lines that ended its span in the file
    (what precedes the next record), unless the rewritten text already ends with them."""
    gap: list[str] = []
    for line in reversed(span[1:]):
        if line.strip() and not line.lstrip().startswith("#"):
            break
        gap.insert(0, line)
    out = text.splitlines(keepends=True)
    for k in range(len(gap), 0, -1):  # the longest run of the gap the rewritten text already ends with
        if [line.rstrip() for line in out[-k:]] == [line.rstrip() for line in gap[:k]]:
            return out + gap[k:]
    return out + gap


def _declare(head: list[str], judgments: str, doc: Any) -> list[str]:
    """The lines before the first record, with the top-level ``judgments:`` set to ``judgments``."""
    import re

    if "judgments" in doc:
        line = doc.lc.key("judgments")[0]
        head = list(head)
        head[line] = re.sub(r"^(judgments\s*:\s*)(['\"]?)\w+\2", rf"\g<1>{judgments}", head[line])
        return head
    line = doc.lc.key("queries")[0]
    return [*head[:line], f"judgments: {judgments}\n", *head[line:]]


def _reads_back(text: str, queries: Any, judgments: str) -> bool:
    """Whether ``text`` loads as the golden set ``queries``, declared ``judgments``."""
    import tempfile

    from pytest_ragmetrics.errors import RagMetricsError
    from pytest_ragmetrics.golden import load_golden

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "golden.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            loaded = load_golden(path)
        except RagMetricsError:
            return False
    return loaded.judgments == judgments and _entries(loaded) == _entries(queries)
