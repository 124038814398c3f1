"""Auditing one very long stream: what each auditor command costs on a stream of 1,000,000
events (``--events``), and what a core write to it costs while it is compacted back.

Run by ``scripts/bench --long`` (which installs everything first). The stream is written
straight into a throwaway etcd as the plugin would have written it (``tests.long_stream``:
chained, a snapshot every 1,000 events); every command then runs as an operator runs it, in
its own process, its wall time and peak memory (maximum resident set) measured. Prints
Markdown; fails if a command fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store import Store
from resource_extend.projections.gpu.node import GPU
from tests.etcd_server import Cluster
from tests.long_stream import PRODUCT, at, grow

PREFIX = "/long"
NODE = "long"


def run_long(workdir: Path, events: int) -> None:
    cluster = Cluster(1, ["--quota-backend-bytes", str(8 << 30)]).start()
    try:
        _long(workdir, cluster.endpoints[0], events)
    finally:
        cluster.stop()


def _long(workdir: Path, endpoint: str, events: int) -> None:
    exports = workdir / "exports"
    exports.mkdir(mode=0o700)
    config = workdir / "gpu.yaml"
    etcd = {"machines": [endpoint], "prefix": PREFIX}
    unbounded = {"max_events": 0, "budget": 0}
    config.write_text(json.dumps({"etcd": etcd, "streams": unbounded, "resident": False}))

    started = time.perf_counter()
    store = Store(EtcdConfig(machines=[endpoint], prefix=PREFIX, timeout=60), GPU)
    store.etcd.budget_per_request()
    try:
        grow(store, NODE, events)
    finally:
        store.close()
    print(f"{events:,} events written in {time.perf_counter() - started:.0f} s\n")

    recent, when = events - 10, at(events - 10).isoformat().replace("+00:00", "Z")
    rows = [
        ("history --limit 5", ["history", NODE, "--limit", "5"]),
        ("show", ["show", NODE]),
        (f"show --at {recent}", ["show", NODE, "--at", str(recent)]),
        ("show --at (a recent time)", ["show", NODE, "--at", when]),
        ("history --since (a recent time)", ["history", NODE, "--since", when]),
        ("verify", ["verify", NODE]),
        ("footprint", ["footprint"]),
    ]
    print("| command | wall time | peak memory |\n|---|---:|---:|")
    for name, argv in rows:
        _row(name, config, argv)
    bounded = {"export_dir": str(exports), "min_age": 0}  # default bounds: 1,000 events
    config.write_text(json.dumps({"etcd": etcd, "streams": bounded, "resident": False}))
    write = ["set-node-resource-usage"]
    request = {"nodename": NODE, "workloads_resource": [{"prod_count_map": {PRODUCT: 1}}]}
    for number in range(1, 4):
        incr = {"delta": True, "incr": number % 2 == 1}
        _row(f"core write {number} (compacts a step)", config, write, {**request, **incr})
    _row("compact --keep 1000 (the rest, in steps)", config, [
        "compact", NODE, "--keep", "1000", "--min-age", "0", "--export-dir", str(exports)
    ])  # fmt: skip
    _row("verify (and its exports)", config, ["verify", NODE])
    _row("history --since 1 --until 3 (from the oldest export)", config, [
        "history", NODE, "--since", "1", "--until", "3", "--archive", str(exports)
    ])  # fmt: skip
    _row("show --at 3 (from the oldest export)", config, [
        "show", NODE, "--at", "3", "--archive", str(exports)
    ])  # fmt: skip
    _row("footprint (after)", config, ["footprint"])
    files = len(list(exports.iterdir()))
    print(f"\n{files} export files; every command answered.")


def _row(name: str, config: Path, argv: list[str], request: object = None) -> None:
    command = ["resource-gpu", "--config", str(config), *argv]
    started = time.perf_counter()
    child = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    child.stdin.write(json.dumps(request or {}).encode())
    child.stdin.close()
    out, err = child.stdout.read(), child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"{name} failed ({child.returncode}): {err.decode()}{out.decode()[-500:]}")
    print(f"| `{name}` | {elapsed:.2f} s | {usage.ru_maxrss / 1024:.0f} MiB |", flush=True)
