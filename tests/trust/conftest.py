"""Fixtures for the trust tests (helpers and the project subclass live in trust_helpers.py).

The malformed-input, fault and safety tests drive the user-facing surfaces (a real
``pytest --rag-eval`` session through ``pytester``, or the ``ragmetrics`` CLI) and
check three things every time: the exit code, a one-paragraph message that names
the file, the record or line and the problem, and that no file changed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))

from trust_helpers import TrustProject  # noqa: E402


@pytest.fixture
def project(pytester: pytest.Pytester) -> TrustProject:
    return TrustProject(pytester)


@pytest.fixture
def baselined(project: TrustProject) -> TrustProject:
    """A project with the baseline of the GOOD rankings (measured once per session, then copied)."""
    project.baseline_once()
    project.reset_calls()
    return project


@pytest.fixture
def released(project: TrustProject) -> Iterator[TrustProject]:
    """A project whose retriever can hang or be interrupted on request (see HANGING_CONFTEST)."""
    from trust_helpers import HANGING_CONFTEST

    project.conftest_text += HANGING_CONFTEST
    (project.path / "conftest.py").write_text(project.conftest_text, encoding="utf-8")
    yield project
    (project.path / "release").write_text("go")  # lets any abandoned retrieval thread finish
