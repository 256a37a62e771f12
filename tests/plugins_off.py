"""The pytest plugins that the tests' own pytest sessions load: the plugin under test, xdist, nothing else.

The dev extra installs third-party pytest plugins (langsmith's comes with langchain-core,
hypothesis' and anyio's with their libraries) that no test session uses. Left to autoload,
they cost about 3 s at every start, and the scan of every installed distribution for entry
points costs more at each of the suite's ~2,000 inner sessions: every ``pytester`` run, every
``python -m pytest`` a test starts, every xdist worker. ``tests/conftest.py`` puts
:data:`PLUGINS_OFF` in ``PYTEST_ADDOPTS`` for ``pytester``; a test that starts
``python -m pytest`` itself passes it.

pytest 8.4 and later turn autoload off (``--disable-plugin-autoload``) and load the two by
module. A ``-p`` still scans every distribution's entry points unless the plugin is already
registered under that name, so in-process runs hand pytest the two modules themselves
(:data:`IN_PROCESS`, registered under their module names) and the ``-p`` finds them there.
Older pytest has no such flag, so there the idle plugins are turned off one by one instead.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

_VERSION = tuple(int(part) for part in pytest.__version__.split(".")[:2] if part.isdigit())
_XDIST = importlib.util.find_spec("xdist") is not None

#: Arguments for every pytest session a test starts.
PLUGINS_OFF: tuple[str, ...]
#: Autoload left on, the idle plugins off one by one: for a session that must find the plugin
#: through its entry point, as a user's does.
IDLE_OFF = ("-p", "no:langsmith_plugin", "-p", "no:hypothesispytest", "-p", "no:anyio", "-p", "no:randomly")
#: Plugin modules for pytester's in-process runs, registered before the arguments are read.
IN_PROCESS: tuple[ModuleType, ...] = ()
if _VERSION >= (8, 4):
    import pytest_ragmetrics.plugin

    PLUGINS_OFF = ("--disable-plugin-autoload", "-p", "pytest_ragmetrics.plugin",
                   *(("-p", "xdist.plugin") if _XDIST else ()))
    IN_PROCESS = (pytest_ragmetrics.plugin,)
    if _XDIST:
        import xdist.plugin

        IN_PROCESS += (xdist.plugin,)
else:
    PLUGINS_OFF = IDLE_OFF
