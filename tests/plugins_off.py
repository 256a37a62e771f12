"""The pytest plugins that the tests' own pytest sessions load: the plugin under test, xdist, nothing else.

The dev extra installs third-party pytest plugins (langsmith's comes with langchain-core,
hypothesis' and anyio's with their libraries) that no test session uses. Left to autoload,
they cost about 3 s at every start, and the scan of every installed distribution for entry
points costs more at each of the suite's ~2,000 inner sessions: every ``pytester`` run, every
``python -m pytest`` a test starts, every xdist worker. ``tests/conftest.py`` puts
:data:`PLUGINS_OFF` in ``PYTEST_ADDOPTS`` for ``pytester``; a test that starts
``python -m pytest`` itself passes it.

pytest 8.4 and later turn autoload off (``--disable-plugin-autoload``) and load the two by
entry-point name. Older pytest cannot load a plugin by that name without autoload, so there
the idle plugins are turned off one by one instead.
"""

from __future__ import annotations

import importlib.util

import pytest

_VERSION = tuple(int(part) for part in pytest.__version__.split(".")[:2] if part.isdigit())
_XDIST = importlib.util.find_spec("xdist") is not None

#: Arguments for every pytest session a test starts.
PLUGINS_OFF: tuple[str, ...]
if _VERSION >= (8, 4):
    PLUGINS_OFF = ("--disable-plugin-autoload", "-p", "ragmetrics", *(("-p", "xdist") if _XDIST else ()))
else:
    PLUGINS_OFF = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio", "-p", "no:randomly")
