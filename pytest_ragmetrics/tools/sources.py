"""Where a pool's rankings come from: the systems a team compares.

A pool is only as good as the systems it is drawn from, so ``ragmetrics pool``
takes them as they are found in a project:

- a **retriever**: ``module:attr`` naming an object with the retriever protocol
  (``search(query, k)``, optionally ``search_batch(queries, k)``), or a class or
  zero-argument function that returns one, imported as pytest imports a
  conftest: the project root first on ``sys.path`` (:func:`load_retriever`);
- a **run**: a TREC run file, or a run artifact written by ``pytest --rag-eval
  --rag-report=PATH`` (:func:`run_rankings`);
- the **reference stack**'s modes over a corpus (:func:`stack_rankings`).

Each gives, per question, its ranked results as :class:`Entry` tuples (the id it
ranked, the document that id belongs to, the text it carried); pooling
(:mod:`pytest_ragmetrics.tools.pool`) takes it from there. Nothing here imports
the reference stack: retriever and run sources work with the core install alone.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

from pytest_ragmetrics.errors import InputError, RagMetricsError, RetrieverError, brief_repr, listed
from pytest_ragmetrics.files import read_text
from pytest_ragmetrics.metrics import document_of
from pytest_ragmetrics.progress import resolve as resolve_progress
from pytest_ragmetrics.protocol import accepts_filters, search_problem, search_with_filters
from pytest_ragmetrics.results import normalize_results
from pytest_ragmetrics.tools.export import artifact_rankings
from pytest_ragmetrics.trec import read_run

__all__ = [
    "KINDS",
    "RETRIEVER_PROTOCOL",
    "Entry",
    "Ranked",
    "Source",
    "load_retriever",
    "project_on_path",
    "retriever_problem",
    "retriever_rankings",
    "run_rankings",
    "stack_rankings",
]

#: The kinds of source a candidates file records.
KINDS = ("retriever", "run", "stack")

#: The retriever protocol as ``--retriever`` needs it, in the words of every message about it.
RETRIEVER_PROTOCOL = (
    "A retriever source must name an object with search(query: str, k: int) returning ranked results, best "
    "first: str ids, (id, score) pairs, objects with an .id or mappings with \"id\" (and a text, shown to "
    "annotators); "
    "search_batch(queries: list[str], k: int) is optional. It may also name a class or a zero-argument "
    "function that returns such an object."
)


@dataclass(frozen=True)
class Source:
    """One system a pool is drawn from, as the candidates file's ``_meta.sources`` records it."""

    name: str
    kind: str  # one of KINDS
    spec: str  # what was asked for: module:attr, the run file, the stack mode and its settings

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind, "spec": self.spec}


class Entry(NamedTuple):
    """One ranked result: the id the source ranked, its document, and its text if it carried one."""

    rid: str
    doc: str
    text: str | None = None


@dataclass
class Ranked:
    """One source's rankings, question id -> entries best first (at most ``depth`` documents each).

    ``ignored`` lists a run's queries that are not among the questions pooled;
    ``missing`` the questions the source gave no ranking for (a run without
    lines for them, an artifact where they errored)."""

    source: Source
    rankings: dict[str, list[Entry]]
    ignored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def best_per_document(entries: Sequence[Entry], depth: int) -> list[Entry]:
    """The first entry of each document, at most ``depth`` documents: a document's best rank counts."""
    out: list[Entry] = []
    seen: set[str] = set()
    for entry in entries:
        if entry.doc in seen:
            continue
        seen.add(entry.doc)
        out.append(entry)
        if len(out) == depth:
            break
    return out


# ------------------------------------------------------------------------ retrievers


@contextlib.contextmanager
def project_on_path(root: str | Path) -> Iterator[Path]:
    """Put the project root first on ``sys.path`` for the duration (imports and searches),
    as pytest does for a conftest at the root; take it off afterwards."""
    path = Path(root).resolve()
    if not path.is_dir():
        raise RagMetricsError(f"project root {root} is not a directory")
    entry = str(path)
    sys.path.insert(0, entry)
    importlib.invalidate_caches()  # modules written since the last import must be found
    try:
        yield path
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def retriever_problem(retriever: Any, what: str) -> str | None:
    """What keeps ``retriever`` from being searched, in one sentence; ``None`` when it can be.
    ``what`` says where it came from ("mod:attr returned ...")."""
    return search_problem(retriever, what)


def _where(exc: BaseException, root: Path | None = None) -> str:
    """`` (at file:line)``: where ``exc`` was raised, in the project's own code (under ``root``)
    when a frame is, else the innermost frame."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (at {exc.filename}:{exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if root is not None and _under(f.filename, root)]
    if not (own or frames):
        return ""
    frame = (own or frames)[-1]
    return f" (at {frame.filename}:{frame.lineno})"


def _under(filename: str, root: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(root)
    except (OSError, ValueError):
        return False


def _raised(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _module_name(raw: str, root: Path) -> str:
    """``pkg.mod`` as given, or ``pkg/mod.py`` (a path under the root) turned into ``pkg.mod``."""
    if not (raw.endswith(".py") or "/" in raw or os.sep in raw):
        return raw
    path = Path(raw)
    path = (root / path if not path.is_absolute() else path).resolve()
    try:
        rel = path.with_suffix("").relative_to(root)
    except ValueError:
        raise RagMetricsError(f"{raw} is not under the project root {root}: give a module name importable "
                              "from the root, or pass --rootdir DIR") from None
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import(spec: str, module_name: str, root: Path) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            rel = missing.replace(".", "/")
            raise RagMetricsError(
                f"retriever {spec!r}: no module named {missing!r}: looked for {rel}.py and {rel}/ under the "
                f"project root {root} (first on sys.path) and on the rest of sys.path; run from the project "
                "root or pass --rootdir DIR"
            ) from None
        raise RagMetricsError(f"retriever {spec!r}: importing {module_name} failed: {_raised(exc)}{_where(exc, root)} "
                              "(a module it imports is not installed)") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a SyntaxError, an error or sys.exit() at import time
        raise RagMetricsError(f"retriever {spec!r}: importing {module_name} raised {_raised(exc)}"
                              f"{_where(exc, root)}") from None
    shadowed = _shadowed(module_name, root)
    if shadowed is not None:
        raise RagMetricsError(f"retriever {spec!r}: {shadowed}")
    return module


def _shadowed(module_name: str, root: Path) -> str | None:
    """Why the project's own module of that name is not the one imported, if it is not:
    a module of the same name was imported before from elsewhere (the standard library, a package)."""
    top = module_name.partition(".")[0]
    local = next((p for p in (root / f"{top}.py", root / top / "__init__.py") if p.is_file()), None)
    module = sys.modules.get(top)
    if local is None or module is None:
        return None
    locations = [loc for loc in (getattr(module, "__file__", None), *(getattr(module, "__path__", None) or ())) if loc]
    if any(Path(loc).resolve().is_relative_to(root) for loc in locations):
        return None
    elsewhere = locations[0] if locations else "a built-in module"
    return (f"the module {top!r} was already imported from {elsewhere}, so {local} is not the one used: "
            "rename it")


def _imported(value: Any, module_name: str) -> bool:
    """A module, class or function a module imported rather than defined: not worth listing."""
    if isinstance(value, ModuleType):
        return True
    return (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ != module_name


def _fixture_function(obj: Any) -> Any:
    """The function behind a ``@pytest.fixture`` (which refuses to be called directly), else None."""
    getter = getattr(obj, "_get_wrapped_function", None)  # pytest >= 8.4
    if callable(getter) and type(obj).__name__ == "FixtureFunctionDefinition":
        return getter()
    wrapped = getattr(obj, "__pytest_wrapped__", None)  # older pytest
    return getattr(wrapped, "obj", None) if wrapped is not None else None


def load_retriever(spec: str, root: str | Path) -> Any:
    """The retriever that ``spec`` (``module:attr``, ``attr`` possibly dotted) names.

    Imported with ``root`` first on ``sys.path`` (call it inside
    :func:`project_on_path` so that lazy imports during searches resolve the same
    way). A class or zero-argument function is called (a zero-argument
    ``@pytest.fixture`` too, such as a conftest's ``rag_retriever``); the result
    must follow :data:`RETRIEVER_PROTOCOL`. Every failure is a
    :class:`RagMetricsError` naming the spec and what went wrong.
    """
    root = Path(root).resolve()
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part.strip() or not attr.strip():
        raise RagMetricsError(f"retriever {spec!r}: expected MODULE:ATTR, e.g. myproject.search:make_retriever")
    module_name = _module_name(module_part.strip(), root)
    module = _import(spec, module_name, root)
    obj: Any = module
    for i, part in enumerate(attr.strip().split(".")):
        if not hasattr(obj, part):
            owner = module_name if i == 0 else f"{module_name}:{'.'.join(attr.split('.')[:i])}"
            found = getattr(obj, "__file__", None) if i == 0 else None
            names = [n for n, v in sorted(getattr(obj, "__dict__", {}).items())
                     if not n.startswith("_") and not _imported(v, module_name)]
            defined = f"; it defines {listed(names)}" if names else ""
            raise RagMetricsError(f"retriever {spec!r}: {owner}{f' ({found})' if found else ''} has no attribute "
                                  f"{part!r}{defined}")
        obj = getattr(obj, part)
    fixture = _fixture_function(obj)
    if isinstance(obj, type) or fixture is not None or (getattr(obj, "search", None) is None and callable(obj)):
        obj = _call_factory(spec, obj if fixture is None else fixture, fixture is not None, root)
        what = f"retriever {spec!r}: {attr}() returned"
    else:
        what = f"retriever {spec!r}: {attr} is"
    problem = retriever_problem(obj, what)
    if problem is not None:
        raise RagMetricsError(f"{problem}. {RETRIEVER_PROTOCOL}")
    return obj


def _call_factory(spec: str, factory: Any, fixture: bool, root: Path) -> Any:
    kind = "fixture" if fixture else ("class" if isinstance(factory, type) else "function")
    if inspect.isgeneratorfunction(factory):
        raise RagMetricsError(f"retriever {spec!r}: the {kind} yields its retriever; name a function that returns "
                              "one (the fixture can call it and yield its result)")
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind()
        except TypeError:
            needed = [n for n, p in signature.parameters.items()
                      if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            extra = " (fixtures it requests are not available outside pytest)" if fixture else ""
            raise RagMetricsError(f"retriever {spec!r}: the {kind} needs arguments ({', '.join(needed)}){extra}; "
                                  "name an object with search, or a class or function callable without "
                                  "arguments") from None
    try:
        return factory()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise RagMetricsError(f"retriever {spec!r}: calling it raised {_raised(exc)}{_where(exc, root)}") from None


#: Questions per ``search_batch`` call: what ``pytest --rag-eval`` asks at a time by default
#: (``--rag-batch-size``), so a source or an ablation row is searched as the plugin searches, and
#: how often the progress of a long search is told.
SEARCH_SLICE = 32


def search_in_slices(search_batch: Any, texts: Sequence[Any], progress: Any, task: str, what: str,
                     wrap_errors: bool, error: type[RagMetricsError] = RagMetricsError) -> list[Any]:
    """``search_batch`` over ``texts`` in slices of :data:`SEARCH_SLICE`, each checked to answer
    one result list per question (else ``error``); ``what`` names the source in messages, and with
    ``wrap_errors`` what the call raises becomes a :class:`RagMetricsError` saying where."""
    results: list[Any] = []
    progress.start(task, len(texts), "questions")
    try:
        for start in range(0, len(texts), SEARCH_SLICE):
            part = texts[start:start + SEARCH_SLICE]
            try:
                found = list(search_batch(part))
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                if not wrap_errors:
                    raise
                raise RagMetricsError(f"{what}: search_batch raised {_raised(exc)}{_where(exc)}") from None
            if len(found) != len(part):
                raise error(f"{what}: search_batch returned {len(found)} lists for {len(part)} questions")
            results.extend(found)
            progress.advance(len(part))
    finally:
        progress.finish()
    return results


def retriever_rankings(
    source: Source,
    retriever: Any,
    questions: Sequence[tuple[str, str]],
    depth: int,
    id_separator: str | None,
    progress: Any = None,
    filters: Mapping[str, Mapping[str, Any]] | None = None,
) -> Ranked:
    """Ask ``retriever`` for ``depth`` results per question, as the gate asks for k.

    ``questions`` are ``(qid, text)``. ``search_batch(texts, depth)`` is called with
    :data:`SEARCH_SLICE` questions at a time when the retriever has it (as the plugin
    calls it), else ``search(text, depth)`` per question; ``progress`` shows how many
    are done. Results past ``depth`` are cut (as the gate cuts at k), ids are mapped to
    documents by ``id_separator`` (the gate's rule) and repeats dropped, so a
    retriever that returns several chunks of a document contributes fewer
    documents: the ones the gate would judge at k = ``depth``.

    ``filters`` (qid -> a golden record's filters) are replayed as the gate sends them:
    ``search(text, depth, filters=...)``, or ``search_batch(texts, depth, filters=[...])`` when
    ``search_batch`` takes them (else such questions are searched one at a time); a retriever whose
    ``search`` takes no ``filters`` is refused, as the plugin refuses it.
    """
    progress = resolve_progress(progress)
    label = f"{source.kind} {source.name!r} ({source.spec})"
    task = f"searching {source.name}"
    wanted = [dict(filters[qid]) if filters and filters.get(qid) else None for qid, _ in questions]
    if any(wanted):
        problem = search_problem(retriever, f"{label}:", [qid for (qid, _), f in zip(questions, wanted) if f])
        if problem is not None:
            raise RagMetricsError(problem)
    asked = [(text, f) for (_, text), f in zip(questions, wanted)]
    batch = getattr(retriever, "search_batch", None)
    results: list[Any]
    if callable(batch) and (not any(wanted) or accepts_filters(batch)):
        results = search_in_slices(
            lambda part: batch([t for t, _ in part], depth, **({"filters": [copy.deepcopy(f) for _, f in part]}
                                                              if any(f for _, f in part) else {})),
            asked, progress, task, label, wrap_errors=True)
    else:
        results = []
        progress.start(task, len(questions), "questions")
        try:
            for (qid, text), only in zip(questions, wanted):
                try:
                    results.append(search_with_filters(retriever, text, depth, only))
                except KeyboardInterrupt:
                    raise
                except Exception as exc:
                    raise RagMetricsError(f"{label}: search raised on question {qid!r}: "
                                          f"{_raised(exc)}{_where(exc)}") from None
                progress.advance(1)
        finally:
            progress.finish()
    rankings: dict[str, list[Entry]] = {}
    for (qid, _), items in zip(questions, results):
        if items is not None and not isinstance(items, (str, bytes, Mapping)):
            try:
                items = list(items)  # a generator is read once, here
            except TypeError:
                pass  # not iterable: normalize_results says so
        rankings[qid] = ranked_entries(items, depth, qid, id_separator, label)
    return Ranked(source, rankings)


def ranked_entries(items: Any, depth: int, qid: str, id_separator: str | None, label: str) -> list[Entry]:
    """One retriever answer as the gate reads it: checked (an error names ``label``), cut at
    ``depth``, ids mapped to documents by ``id_separator``, each document at its best rank."""
    try:
        returned = normalize_results(items, depth, qid)
    except RetrieverError as exc:
        raise RetrieverError(f"{label}: {exc}") from None
    entries = []
    for item, rid in zip(items[:depth], returned.ids):
        found = item.get("text") if isinstance(item, Mapping) else getattr(item, "text", None)
        entries.append(Entry(rid, document_of(rid, id_separator), found if isinstance(found, str) else None))
    return best_per_document(entries, depth)


# ------------------------------------------------------------------- the reference stack


def stack_rankings(
    retriever: Any,
    questions: Sequence[tuple[str, str]],
    modes: Sequence[str],
    depth: int,
    *,
    spec: str = "",
    id_separator: str | None = None,
    progress: Any = None,
    filters: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Ranked]:
    """One :class:`Ranked` per mode of the reference stack (``search_batch`` in slices of
    :data:`SEARCH_SLICE` questions, shown to ``progress`` as they are done).

    Asked with ``unique_docs``, each mode contributes ``depth`` distinct
    documents; a hit's own ``doc_id`` names its document (else ``id_separator``
    does) and its chunk text comes along. ``spec`` describes the settings
    (corpus, chunking) for the candidates file.
    """
    progress = resolve_progress(progress)
    asked = [(text, dict(filters[qid]) if filters and filters.get(qid) else None) for qid, text in questions]
    out = []
    for mode in dict.fromkeys(modes):
        source = Source(mode, "stack", f"mode={mode} {spec}".strip())
        results = search_in_slices(
            lambda part, mode=mode: retriever.search_batch(
                [t for t, _ in part], top_k=depth, mode=mode, threshold=None, unique_docs=True,
                **({"filters": [copy.deepcopy(f) for _, f in part]} if any(f for _, f in part) else {})),
            asked, progress, f"searching mode {mode}", f"mode {mode}", wrap_errors=False)
        rankings: dict[str, list[Entry]] = {}
        for (qid, _), items in zip(questions, results):
            items = list(items)
            returned = normalize_results(items, len(items), qid)
            entries = []
            for item, rid in zip(items, returned.ids):
                doc = getattr(item, "doc_id", None)
                text = getattr(item, "text", None)
                entries.append(Entry(rid, doc if isinstance(doc, str) else document_of(rid, id_separator),
                                     text if isinstance(text, str) else None))
            rankings[qid] = best_per_document(entries, depth)
        out.append(Ranked(source, rankings))
    return out


# --------------------------------------------------------------------------------- runs


def run_rankings(
    path: str | Path,
    qids: Sequence[str],
    depth: int,
    id_separator: str | None = None,
    name: str | None = None,
) -> Ranked:
    """The top ``depth`` documents per question of a TREC run file or a run artifact (JSON).

    TREC runs are ordered as trec_eval orders them (score descending, then doc id
    descending) and are document-level: ids are kept as given unless
    ``id_separator`` maps them. An artifact's rankings are the documents the gate
    scored, in order. The run's queries that are not in ``qids`` are listed in
    :attr:`Ranked.ignored`; a run none of whose queries is in ``qids`` is an
    :class:`InputError` (it is a run of another question set).
    """
    p = Path(path)
    text = read_text(p)
    is_json = text.lstrip().startswith("{")
    raw = artifact_rankings(p, text) if is_json else read_run(p)
    kind = "run artifact" if is_json else "TREC run"
    source = Source(name or p.stem, "run", str(path))
    wanted = set(qids)
    ignored = [q for q in raw if q not in wanted]
    if not any(q in wanted for q in raw):
        shown = listed([brief_repr(q) for q in raw], 5)
        raise InputError(str(p), None, f"none of the {len(raw)} queries of this {kind} is among the questions "
                                       f"pooled ({shown}): is it a run of another question set?")
    rankings = {}
    for qid in qids:
        if qid in raw:
            entries = [Entry(rid, document_of(rid, id_separator)) for rid in raw[qid]]
            rankings[qid] = best_per_document(entries, depth)
    missing = [q for q in qids if not rankings.get(q)]
    return Ranked(source, rankings, ignored, missing)

