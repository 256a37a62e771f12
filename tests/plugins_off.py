"""The third-party pytest plugins that the tests' own pytest sessions load for nothing.

The dev extra installs them (langsmith's comes with langchain-core, hypothesis' and
anyio's with their libraries); no test session uses them, and together they cost about
3 s at every start: every ``pytester`` run, every ``python -m pytest`` a test starts,
every xdist worker. ``tests/conftest.py`` puts them in ``PYTEST_ADDOPTS`` for ``pytester``;
a test that starts ``python -m pytest`` itself passes :data:`PLUGINS_OFF`.
"""

from __future__ import annotations

#: ``-p no:<name>`` for each, by entry-point name (a name that is not installed is ignored).
PLUGINS_OFF: tuple[str, ...] = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio",
                                "-p", "no:randomly")
