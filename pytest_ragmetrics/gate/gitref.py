"""The project's git history, as the baseline's ratchet and a lowering's author read it.

Every call runs ``git`` from the file's own folder with a timeout and no input, and a failure is
told apart from "no such file at that ref": :class:`RefUnreadable` carries git's own message.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping

from pytest_ragmetrics.errors import RagMetricsError

__all__ = ["RefUnreadable", "run_git", "folder_of", "ref_exists", "file_at_ref", "author_from_git"]



class RefUnreadable(RagMetricsError):
    """A git ref that cannot be read here (git's own message)."""


def run_git(folder: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None


def folder_of(path: Path) -> Path:
    folder = Path(path).absolute().parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def _git_problem(done: subprocess.CompletedProcess[str] | None) -> str:
    if done is None:
        return "git could not be run"
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[0] if lines else f"git exited with {done.returncode}"


def ref_exists(path: Path, ref: str) -> bool:
    """``git rev-parse --verify --quiet REF^{commit}`` from the file's folder."""
    done = run_git(folder_of(path), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return done is not None and done.returncode == 0


def file_at_ref(path: Path, ref: str) -> str | None:
    """The file's text at git ``ref`` (``git cat-file``, from the file's folder); None when the ref holds
    no such file. Raises :class:`RefUnreadable` with git's message when the ref cannot be read (no git,
    not a repository, no such ref)."""
    folder = folder_of(path)
    if not ref_exists(path, ref):
        why = run_git(folder, "show", "-s", "--format=%H", ref, "--")
        problem = _git_problem(why) if why is None or why.returncode else f"{ref} does not name a commit"
        raise RefUnreadable(problem)
    spec = f"{ref}:./{Path(path).name}" if Path(path).absolute().parent == folder else None
    if spec is None:  # the file's folder does not exist: nothing there at any ref
        return None
    if (done := run_git(folder, "cat-file", "-e", spec)) is None or done.returncode:
        return None
    done = run_git(folder, "cat-file", "blob", spec)
    if done is None or done.returncode:
        raise RefUnreadable(_git_problem(done))
    return done.stdout




def author_from_git(folder: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """Who records a lowering, as git would sign a commit made here: ``GIT_AUTHOR_NAME`` and
    ``GIT_AUTHOR_EMAIL``, else ``git config user.name`` and ``user.email``; on GitHub Actions without
    either, ``GITHUB_ACTOR``. ``Name <email>``; None when nothing says."""
    env = os.environ if environ is None else environ

    def config(key: str) -> str:
        done = run_git(folder, "config", "--get", key)
        return done.stdout.strip() if done is not None and done.returncode == 0 else ""

    name = env.get("GIT_AUTHOR_NAME", "").strip() or config("user.name")
    email = env.get("GIT_AUTHOR_EMAIL", "").strip() or config("user.email")
    if name or email:
        return " ".join(part for part in (name, f"<{email}>" if email else "") if part)
    actor = env.get("GITHUB_ACTOR", "").strip()
    return actor or None
