"""Open a page in Debian's headless Chromium, as CI does: the HTML report tests share this.

``browse`` takes a screenshot and returns the browser's log (console messages show
as ``CONSOLE`` lines); ``dump_dom`` returns the DOM after the page rendered. Both
skip with the reason on a machine without Chromium (.ci/run installs it; under
``RAGMETRICS_REQUIRE_ALL=1`` a skip is a failure). The flags keep the browser off
the network: no background requests, component updates, sync or QUIC.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

__all__ = ["CHROMIUM_FLAGS", "browse", "dump_dom", "console_errors"]

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--window-size=1200,1400"]


def _chromium(page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("headless Chromium is not installed here (.ci/run installs Debian's chromium)")
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def browse(page: Path, screenshot: Path) -> str:
    """Open a page in headless Chromium and screenshot it; return its log."""
    return _chromium(page, f"--screenshot={screenshot}").stderr


def dump_dom(page: Path) -> str:
    """The page's DOM as Chromium serialises it once rendered."""
    return _chromium(page, "--dump-dom").stdout


def console_errors(log: str) -> list[str]:
    """Console messages and uncaught errors in a Chromium log."""
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
