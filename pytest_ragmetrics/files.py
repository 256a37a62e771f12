"""Reading and writing files safely: the one place every reader and writer goes through.

Reads decode UTF-8 (a BOM accepted) and name the file in every error; JSON refuses
a repeated key, which ``json.loads`` would resolve silently. Writes are atomic (a
temp file in the same folder, then ``os.replace``) and stable (sorted keys, two-space
indent), so a reader never sees half a file and a committed file diffs well; a device,
FIFO or ``/dev/stdout`` is appended to in place, as a rename would replace it.
:func:`git_commit` reads the repository's HEAD for the provenance runs record.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_ragmetrics.errors import InputError, brief_repr

__all__ = [
    "read_text",
    "loads_json",
    "split_lines",
    "check_line_endings",
    "split_columns",
    "json_lines",
    "check_unicode",
    "check_no_bom",
    "dumps_line",
    "dumps_stable",
    "canonical_digest",
    "atomic_write_text",
    "atomic_write_json",
    "write_problem",
    "in_place",
    "shown_filename",
    "git_commit",
]

# --------------------------------------------------------------------------- reading


def read_text(path: Path) -> str:
    """Read a UTF-8 file (a BOM is accepted); a decoding problem names the byte offset."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(str(path), None, "file not found") from None
    except IsADirectoryError:
        raise InputError(str(path), None, "is a directory, expected a file") from None
    except OSError as exc:
        raise InputError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            str(path), f"line {line}", f"not valid UTF-8 (byte offset {exc.start}); save the file as UTF-8"
        ) from None


class _DuplicateKey(ValueError):
    def __init__(self, key: str, offset: int = -1) -> None:
        super().__init__(key)
        self.key = key
        self.offset = offset


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


#: One decoder for every call without options (``json.loads`` with a hook makes a new one per call).
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def loads_json(text: str, **kwargs: Any) -> Any:
    """``json.loads`` that refuses an object holding the same key twice.

    The standard library keeps the last value silently, so
    ``{"recall@5_tolerance": 0, "recall@5_tolerance": 0.5}`` would loosen a gate
    without a word. A repeated key raises :class:`json.JSONDecodeError` whose
    message names the key and whose position is the repeat, so every reader's
    existing "line N: not valid JSON" message applies. ``kwargs`` go to ``json.loads``.
    """
    try:
        value = _DECODER.decode(text) if not kwargs else json.loads(text, object_pairs_hook=_no_duplicates, **kwargs)
    except _DuplicateKey as exc:
        offset = _duplicate_offset(text, kwargs)
        raise json.JSONDecodeError(f"duplicate key {brief_repr(exc.key)} (a later value would silently "
                                   "replace the earlier one)", text, max(offset, 0)) from None
    if "\\u" in text and _has_surrogate(value):
        escape = _SURROGATE_ESCAPE.search(text)
        raise json.JSONDecodeError(_surrogate_problem(value), text, escape.start() if escape else 0)
    return value


#: ``\uD800``-``\uDFFF`` escapes: only text holding one can decode to a lone surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def check_no_bom(text: str, name: str) -> None:
    """Refuse a U+FEFF after the start of a text file (:func:`read_text` drops one there).

    Two files joined with ``cat`` carry the second one's BOM mid-file, glued to
    the first word of a line: a query id would silently become another query.
    """
    at = text.find("\ufeff")
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        raise InputError(name, f"line {line}", "holds a byte order mark (U+FEFF) after the start of the file "
                                               "(files joined with cat?); remove it")


def split_lines(text: str) -> list[str]:
    """The lines of a text file, split on ``"\\n"`` only (a trailing ``"\\r"`` dropped).

    ``str.splitlines`` also splits on U+2028, U+2029, U+0085 and other characters a
    JSON string may hold raw, so one pasted note would cut a record in two. Every
    reader of a line-oriented file (JSON lines, TREC runs and qrels, question lists)
    goes through here, so line numbers mean what an editor shows.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if text.endswith("\r"):
            text = text[:-1]
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


_BARE_CR = re.compile(r"\r(?!\n)")


def check_line_endings(text: str, name: str) -> None:
    """Refuse carriage returns used as line breaks (classic Mac OS, some spreadsheet
    exports). :func:`split_lines` splits on ``"\\n"`` only, so such a file read as one long
    line and failed with a puzzling message (``Extra data (column 124)``, ``got 600 columns``)."""
    if "\r" not in text:
        return
    bare = _BARE_CR.search(text)
    if bare is None or bare.end() == len(text):  # a final lone CR is dropped by split_lines
        return
    where = f"line {text.count(chr(10), 0, bare.start()) + 1}" if "\n" in text else None
    raise InputError(name, where, "uses CR line endings (a carriage return without a line feed); "
                                  "save it with LF line endings")


#: Whitespace that ``str.split`` takes for a separator but a TREC file must not hold:
#: anything other than a space or a tab (NBSP, U+3000, vertical tab, ...).
_ODD_SPACE = re.compile(r"[^\S \t]")


def split_columns(line: str, name: str, where: str) -> list[str]:
    """The columns of a TREC run or qrels line, separated by spaces and tabs only.

    ``str.split`` also splits on NBSP and other Unicode whitespace, which trec_eval and
    most tools do not: a line they read as 5 columns read here as 6. Such a character
    is refused, named by its code point."""
    odd = _ODD_SPACE.search(line)
    if odd:
        char = odd.group(0)
        label = unicodedata.name(char, "")
        raise InputError(name, where, f"holds U+{ord(char):04X}{f' ({label})' if label else ''} at column "
                                      f"{odd.start() + 1}, whitespace other than a space or a tab: separate the "
                                      "columns with spaces or tabs (an id cannot hold whitespace)")
    return line.split()


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of a JSON-lines file, read with
    :func:`loads_json`; a line that is not JSON is an :class:`InputError` naming the file and line.

    One reader for every JSON-lines format (golden sets, runs, candidates, judgments), so
    each says a bad line the same way.
    """
    name = str(path)
    text = read_text(path)
    check_line_endings(text, name)
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            value = loads_json(line)
        except json.JSONDecodeError as exc:
            raise InputError(name, f"line {number}", f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        except RecursionError:
            raise InputError(name, f"line {number}", "invalid JSON: nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits
            raise InputError(name, f"line {number}", f"invalid JSON: {exc}") from None
        yield number, value


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(value: Any, line: str, name: str, where: str) -> None:
    """Refuse a JSON record holding a lone surrogate, for a reader that parsed ``line`` without
    :func:`loads_json`: it parses, but is not valid Unicode, so nothing could be written with it."""
    if "\\u" in line and _has_surrogate(value):
        raise InputError(name, where, _surrogate_problem(value))


def _surrogate_problem(value: Any) -> str:
    """What holds the lone surrogate, by field: ``field candidates[2].note`` or ``the key '\\ud800'``."""
    field = _surrogate_field(value)
    what = "a value" if not field else field if field.startswith("the key") else f"field {field}"
    return f"{what} holds a lone surrogate (\\ud800-\\udfff escaped), which is not valid Unicode"


def _has_surrogate(value: Any) -> bool:
    """Whether any string (key or value) inside ``value`` holds a lone surrogate, walked without
    recursion (whatever the value holds: a reader's ``parse_constant`` may put its own objects in)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _surrogate_field(value: Any, path: str = "") -> str | None:
    """Where the first lone surrogate sits, as ``field`` / ``candidates[2].note`` / ``key 'x'``."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and _SURROGATE.search(key):
            return f"the key {brief_repr(key)}" + (f" in {path}" if path else "")
        inner = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
        found = _surrogate_field(item, inner)
        if found is not None:
            return found
    return None


def _duplicate_offset(text: str, kwargs: dict[str, Any]) -> int:
    """Where the first repeated key sits: parsed again (only on this error path) with the
    pure-Python scanner, whose object parser knows offsets, unlike the C one."""
    import json.decoder
    import json.scanner

    decoder = json.JSONDecoder(**kwargs)

    def parse_object(s_and_end: tuple[str, int], *args: Any, **kw: Any) -> tuple[dict[str, Any], int]:
        pairs, end = json.decoder.JSONObject(  # type: ignore[attr-defined]  # in json.decoder, not in its stubs
            s_and_end, *args[:2], None, list, *args[4:], **kw)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:  # innermost objects close first, so this object holds the repeat
                start, needle = s_and_end[1], json.dumps(key, ensure_ascii=False)
                first = s_and_end[0].find(needle, start, end)
                raise _DuplicateKey(key, s_and_end[0].find(needle, first + 1, end))
            seen.add(key)
        return dict(pairs), end

    decoder.parse_object = parse_object  # type: ignore[attr-defined]  # read by py_make_scanner, not in the stubs
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        decoder.decode(text)
    except _DuplicateKey as exc:
        return exc.offset
    except (ValueError, RecursionError):
        pass
    return -1


def canonical_digest(value: Any) -> str:
    """sha256 of ``value`` as canonical JSON (sorted keys, no spaces, ASCII): the same content gives
    the same digest however a file holding it was formatted. Seals and content digests use it (a NaN
    digests as ``NaN``: refusing it is the schema's job, with the field named)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# --------------------------------------------------------------------------- writing


_STABLE: dict[str, Any] = {"indent": 2, "sort_keys": True, "ensure_ascii": False, "allow_nan": False}
_WRITE_BLOCK = 1 << 16  # characters per write of atomic_write_json


_ESCAPE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def dumps_line(value: Any, **kwargs: Any) -> str:
    """One JSON-lines record (without its newline): UTF-8 text kept readable, but U+2028,
    U+2029 and U+0085 escaped, since editors and line readers other than
    :func:`split_lines` take them for line breaks. ``kwargs`` go to ``json.dumps``."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    if "\u2028" in text or "\u2029" in text or "\x85" in text:  # only inside strings, where \uXXXX is valid
        text = text.translate(_ESCAPE_BREAKS)
    return text


def dumps_stable(data: Any) -> str:
    """JSON with sorted keys and two-space indent, ending in a newline."""
    return json.dumps(data, **_STABLE) + "\n"


def write_problem(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be written, in words (``File exists`` would mislead
    when a folder on the way is a file)."""
    for folder in path.parents:
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():
                return f"{folder} is a file, not a folder"
            break
    # The temp file beside ``path`` is an implementation detail: name only another path.
    other = exc.filename and str(exc.filename) != str(path) and not _is_temp_of(path, exc.filename)
    where = f" ({exc.filename})" if other else ""
    return f"{exc.strerror or exc}{where}"


def shown_filename(exc: OSError) -> str | None:
    """The file an error is about, as the user named it: the target of an atomic write rather
    than its hidden temp file (``.report.html.k3j2x9.tmp``), which means nothing to them."""
    name = exc.filename
    if name is None:
        return None
    temp = Path(str(name))
    if temp.name.startswith(".") and temp.name.endswith(".tmp") and temp.name.count(".") >= 3:
        if exc.filename2 is not None:
            return str(exc.filename2)
        return str(temp.with_name(temp.name[1:].rsplit(".", 2)[0]))
    return str(name)


def _is_temp_of(path: Path, name: Any) -> bool:
    """Whether ``name`` is one of the temp files :func:`_atomic_write` makes for ``path``."""
    candidate = Path(str(name))
    return candidate.name.endswith(".tmp") and any(
        candidate.parent == p.parent and candidate.name.startswith(f".{p.name}.")
        for p in (path, Path(os.path.realpath(path))))


def atomic_write_text(path: Path, text: str, *, overwrite: bool = True) -> None:
    """Write ``text`` to a temp file in ``path``'s folder, fsync it, then rename it over ``path``.

    Readers (and a process killed at any moment) see the old file or the new one,
    never a mix. A kill between creating and renaming the temp file can leave a
    hidden ``.<name>.*.tmp`` behind; the target itself is never partial. With
    ``overwrite=False`` a file that exists at ``path`` by the time of the rename
    (one that may hold someone's work) is left alone: :class:`FileExistsError`.
    """
    _atomic_write(path, lambda fh: fh.write(text), overwrite)


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``dumps_stable(data)`` atomically, encoding into the temp file 64 KB at a time.

    The same bytes as ``atomic_write_text(path, dumps_stable(data))``, without
    holding the whole text: with ``indent`` json builds a list of small chunks
    before joining them, about 3 KB a query at the peak of a 100,000-query run
    artifact (benchmarks/bench_scale_100k.py).
    """
    def write(fh: Any) -> None:
        parts: list[str] = []
        size = 0
        for chunk in json.JSONEncoder(**_STABLE).iterencode(data):
            parts.append(chunk)
            size += len(chunk)
            if size >= _WRITE_BLOCK:
                fh.write("".join(parts))
                parts, size = [], 0
        parts.append("\n")
        fh.write("".join(parts))

    _atomic_write(path, write)


def _atomic_write(path: Path, write: Any, overwrite: bool = True) -> None:
    """Run ``write(fh)`` on a temp file in ``path``'s folder, fsync it, rename it over
    ``path``, then fsync the folder so the rename itself survives a power cut.

    The file gets the mode a plain ``open(path, "w")`` would give it (the old
    file's mode, or 0666 less the umask), not the temp file's private 0600. A
    symlink is written through, as reads follow it: the temp file goes beside
    the file it points to and replaces that, so the link stays a link and its
    target never goes stale. A device, FIFO or socket, or a path reached through
    ``/dev`` or ``/proc`` (``/dev/stdout``), is written in place instead
    (:func:`_write_in_place`): a rename would replace it with a regular file.
    """
    if in_place(path):
        _write_in_place(path, write, overwrite)
        return
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), mode)
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if not overwrite and (path.exists() or path.is_symlink()):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(target.parent)


#: Where an entry is not a file a rename may replace: devices, and /proc's links to open files.
_SYSTEM_FOLDERS = ("/dev/", "/proc/")


def in_place(path: Path) -> bool:
    """Whether ``path`` must be written where it is, not replaced by a renamed temp file.

    True for an existing target that is neither a regular file nor a folder (a
    character or block device such as ``/dev/null``, a FIFO, a socket), for a path
    under ``/proc``, and for a path any link of whose chain sits in ``/dev`` or
    ``/proc``: ``/dev/stdout`` leads through ``/proc/self/fd/1`` to whatever the shell
    redirected stdout to, maybe a regular log file, which a rename would replace with
    the report alone. Each hop is also checked with its folder's links resolved
    (``/dev/fd`` is a link to ``/proc/self/fd``).
    """
    hop = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        folder = os.path.realpath(os.path.dirname(hop))
        is_link = os.path.islink(hop)
        for where in (hop, os.path.join(folder, os.path.basename(hop))):
            if where.startswith("/proc/") or (is_link and where.startswith(_SYSTEM_FOLDERS)):
                return True
        if not is_link:
            break
        try:
            hop = os.path.normpath(os.path.join(folder, os.readlink(hop)))
        except OSError:
            break
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _write_in_place(path: Path, write: Any, overwrite: bool) -> None:
    """Run ``write(fh)`` on ``path`` opened for appending: a device or FIFO gets the text
    and stays what it is, and a log file that stdout was redirected to keeps what it
    holds (``"w"`` would truncate it). When ``path`` is the file this process's stdout or
    stderr already writes to, the text goes through that descriptor, after what was
    printed so far: a separate one would have its own offset, and later output would
    overwrite the report. Errors (``ENOSPC`` from ``/dev/full``) are :class:`OSError` as usual.
    """
    if not overwrite and (path.exists() or path.is_symlink()):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    with open(path, "a", encoding="utf-8") as fh:
        shared = _shared_stream(os.fstat(fh.fileno()))
        if shared is None:
            write(fh)
            fh.flush()
            return
    with os.fdopen(os.dup(shared), "w", encoding="utf-8", closefd=True) as out:
        write(out)
        out.flush()


def _shared_stream(opened: os.stat_result) -> int | None:
    """The descriptor, 1 or 2, that already writes to the regular file ``opened`` is, if one
    does; Python's buffers for it are flushed first so the order of the text is kept."""
    if not stat.S_ISREG(opened.st_mode):
        return None
    for fd, streams in ((1, (sys.stdout, sys.__stdout__)), (2, (sys.stderr, sys.__stderr__))):
        try:
            mine = os.fstat(fd)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (opened.st_dev, opened.st_ino):
            for stream in streams:
                try:
                    if stream is not None:
                        stream.flush()
                except (OSError, ValueError):
                    pass
            return fd
    return None


def _mode_for(path: Path) -> int:
    """The permission bits an ordinary write of ``path`` would leave."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where the system allows
    (``os.umask`` can only be read by setting it, which races with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable; a system that cannot fsync a folder is skipped."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -------------------------------------------------------------------------- provenance


_GIT_HEAD = re.compile(r"^[0-9a-f]{40}$")


def git_commit(start: Path) -> str | None:
    """The checked-out commit, recorded in baselines and run artifacts.

    Asks ``git rev-parse HEAD`` (it knows worktrees, packed refs and every other
    layout); where git is absent, slow or fails, reads ``.git`` directly.
    """
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=start, capture_output=True, text=True,
                              timeout=5, stdin=subprocess.DEVNULL)
        head = done.stdout.strip()
        if done.returncode == 0 and _GIT_HEAD.match(head):
            return head
    except (OSError, subprocess.SubprocessError):
        pass
    return _git_commit_from_files(start)


def _git_commit_from_files(start: Path) -> str | None:
    """The commit read from ``.git`` without running git. In a worktree ``.git`` is a
    file naming the worktree's git folder, whose ``commondir`` holds the branches."""
    for folder in [start, *start.parents]:
        git = folder / ".git"
        if git.is_file():  # a worktree: "gitdir: <path>"
            try:
                git = (folder / git.read_text().split(":", 1)[1].strip()).resolve()
            except (OSError, IndexError):
                return None
        if git.is_dir():
            try:
                common = git / (git / "commondir").read_text().strip() if (git / "commondir").is_file() else git
                head = (git / "HEAD").read_text().strip()
                if head.startswith("ref: "):
                    ref = head[5:]
                    head = ""
                    for where in dict.fromkeys([git, common]):
                        if (where / ref).is_file():
                            head = (where / ref).read_text().strip()
                            break
                        packed = where / "packed-refs"
                        if packed.is_file():
                            for line in packed.read_text().splitlines():
                                if line.endswith(" " + ref):
                                    head = line.split()[0]
                        if head:
                            break
                return head if _GIT_HEAD.match(head) else None
            except OSError:
                return None
    return None
