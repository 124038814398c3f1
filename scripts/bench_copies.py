"""What the config's parsed copy (``ledger.host.copies``) earns a call in a process of its own
(``resident: false``): a read with the copy kept, against a read without one, interleaved.

Without is the same call with its runtime directory untrusted (writable by others), so that no
copy is kept or taken and each call imports PyYAML and parses the file; nothing else of a read
uses that directory. Run from the repository root with the venv's Python::

    .venv/bin/python scripts/bench_copies.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.throwaway import throwaway_etcd

READ = json.dumps({"nodename": "n1"}).encode()


def timed(argv: list[str], stdin: bytes, runtime: Path) -> float:
    """Seconds one call took, run with ``runtime`` as its runtime directory."""
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv[-1]} failed: {done.stderr.decode().strip()}")
    return took


def main(rounds: int) -> None:
    with throwaway_etcd() as (endpoint, workdir):
        config = workdir / "gpu.yaml"
        settings = {"machines": [endpoint], "prefix": "/bench-copies"}
        config.write_text(json.dumps({"etcd": settings, "resident": False}))
        call = ["resource-gpu", "--config", str(config)]
        kept, untrusted = workdir / "kept", workdir / "untrusted"
        kept.mkdir(mode=0o700)
        untrusted.mkdir(mode=0o700)
        own = f"resource-gpu-{os.getuid()}"
        (untrusted / own).mkdir()
        os.chmod(untrusted / own, 0o777)  # another user could swap what is in it: no copy
        node = {"nodename": "n1", "resource": {"prod_count_map": {"A100": 8}}}
        timed([*call, "add-node"], json.dumps(node).encode(), kept)
        timed([*call, "get-node-resource-info"], READ, kept)  # leaves the copy
        if not any(
            name.endswith(".config") for name in os.listdir(kept / f"resource-gpu-{os.getuid()}")
        ):
            raise SystemExit("no parsed copy was kept: nothing to compare")
        with_copy, without = [], []
        for _ in range(rounds):
            with_copy.append(timed([*call, "get-node-resource-info"], READ, kept))
            without.append(timed([*call, "get-node-resource-info"], READ, untrusted))
    a, b = statistics.median(with_copy) * 1e3, statistics.median(without) * 1e3
    print(
        f"resource-gpu get-node-resource-info, resident: false, median of {rounds} interleaved "
        f"runs on {os.cpu_count()} CPUs: {a:.1f} ms with the parsed copy, {b:.1f} ms without; "
        f"the copy saves {b - a:.1f} ms, {100 * (b - a) / b:.0f} % of the call"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
