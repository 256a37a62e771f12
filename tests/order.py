"""The order the suite's tests run in (``tests/conftest.py`` applies it after ``-m`` selects)."""

from __future__ import annotations

from typing import Any

__all__ = ["long_modules_first"]


def long_modules_first(items: list[Any]) -> None:
    """Move the modules holding a ``slow`` item to the front, in place; each module's items stay
    together and in order (the sort is stable), and a list without slow items keeps its order.

    Longest first: under ``-n 2`` the last tests handed out are then short ones, so neither worker
    sits idle while the other finishes a long test.
    """
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)
