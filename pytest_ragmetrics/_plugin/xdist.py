"""What the plugin reads of pytest-xdist's internals, each read guarded.

pytest-xdist offers no public API for a worker's queue or the controller's
progress counter; these helpers read its internals and fall back to plain
behaviour when a release changes them (the supported range is pinned in the
``dev`` extra and tested there).
"""

from __future__ import annotations

import pytest

__all__ = ["xdist_queue", "hide_progress_counter"]


def xdist_queue(config: pytest.Config) -> list[int] | None:
    """Indices of the items this xdist worker has been handed and not yet run.

    Reads pytest-xdist's WorkerInteractor (not a public API, hence every guard):
    ``None`` outside a worker or if xdist's internals change, and the caller
    falls back to the items that follow in run order.
    """
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ != "WorkerInteractor":
            continue
        try:
            nxt = plugin.nextitem_index
            with plugin.torun.lock() as pending:
                queued = [i for i in pending if isinstance(i, int)]
        except Exception:
            return None
        return ([nxt] if isinstance(nxt, int) else []) + queued
    return None


def hide_progress_counter(config: pytest.Config) -> None:
    """Stop the terminal's ``[ 70%]`` counter before the controller reports the gate
    items itself: under xdist the counter knows only the items the workers ran."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None and hasattr(terminal, "_show_progress_info"):
        terminal._show_progress_info = False
