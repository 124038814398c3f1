"""Headless Chromium as the page tests run it (Debian's ``chromium``; ``.ci/run`` installs it):
found once, run once per page with a profile of its own. The ``chromium`` fixture is in
``conftest``: where Chromium is missing the tests fail, saying how to install it; a developer
without it may set ``RESOURCE_EXTEND_NO_BROWSER=1`` to skip them knowingly (CI never does)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


def find_chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("RESOURCE_EXTEND_NO_BROWSER") == "1":
        pytest.skip("no Chromium here, and RESOURCE_EXTEND_NO_BROWSER=1 says so")
    pytest.fail(
        "Chromium is missing: the page tests open the pages in it (apt-get install chromium; "
        "or set RESOURCE_EXTEND_NO_BROWSER=1 to skip them knowingly)"
    )


HEADLESS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--hide-scrollbars", "--no-first-run",
)  # fmt: skip
"""Chromium as the tests run it: no window, no sandbox (as root), no GPU, /tmp rather than a
small /dev/shm, nothing fetched."""


def chromium_run(browser: str, page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """Chromium once on ``page``, with a profile of its own (removed after)."""
    profile = tempfile.mkdtemp(prefix="chromium-profile.")
    try:
        done = subprocess.run(
            [browser, *HEADLESS, f"--user-data-dir={profile}", *flags, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done
