"""Fixtures for the plugin tests; the project writer and output parsers live in ragproject.py."""

from __future__ import annotations

import pytest

from ragproject import RagProject


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagProject:
    return RagProject(pytester)


@pytest.fixture
def baselined(project: RagProject) -> RagProject:
    """A project whose baseline was written from the GOOD rankings (measured once per session, then copied)."""
    project.baseline_once()
    project.reset_calls()
    return project
