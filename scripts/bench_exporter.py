"""What ``exporter`` costs at 10,000 nodes: a scrape over HTTP (the goal: well under 1 s), a
refresh (the etcd read behind it), and the exporter's memory, for resource-gpu (one product a
node) and resource-storage (four volumes and one disk a node), against a throwaway etcd.

    .venv/bin/python scripts/bench_exporter.py [--nodes N] [--scrapes N]

``main()`` prints a Markdown table; ``measure(endpoint, workdir, program, nodes, scrapes)``
returns one row's figures, for ``scripts/bench`` to call.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.transport import HttpTransport
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.digests import Tip, with_tip
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.projections.gpu.node import GPU
from resource_extend.projections.gpu.node import NodeState as GpuState
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.node import STORAGE
from resource_extend.projections.storage.state import NodeState as StorageState
from resource_extend.projections.storage.wire.resources import NodeResource
from tests.etcd_server import Cluster

T = 2**40
G = 2**30
PREFIX = "/bench-exporter"


def gpu_head(seq: int) -> bytes:
    return GPU.write_head(GpuState(capacity={"nvidia-3090": 8}, usage={"nvidia-3090": 2}), seq)


def storage_head(seq: int) -> bytes:
    paths = [f"/data{i}" for i in range(4)]
    disk = Disk(device="/dev/vda", mounts=["/"], read_iops=10000, write_iops=10000,
                read_bps=10 * G, write_bps=10 * G)  # fmt: skip
    capacity = NodeResource(volumes=dict.fromkeys(paths, T), disks=[disk], storage=4 * T)
    usage = NodeResource(
        volumes=dict.fromkeys(paths, T // 4), disks=[disk.with_quota((10, 10, G, G))], storage=T
    )
    return STORAGE.write_head(StorageState(capacity=capacity, usage=usage), seq)


def seed(endpoint: str, program: str, nodes: int) -> None:
    """``nodes`` records of the program's kind, each at seq 1 with its event 1 (a stub: the
    exporter reads only that it is there), 128 keys a transaction."""
    kind, head = ("gpu", gpu_head) if program == "resource-gpu" else ("storage", storage_head)
    keys = KeyLayout(PREFIX, kind)
    at = datetime.now(timezone.utc)
    record = with_tip(head(1), Tip("0" * 64, at))
    event = json.dumps({"seq": 1, "verb": "add-node", "at": at.isoformat()}).encode()
    items = []
    for i in range(nodes):
        name = f"{kind}-node-{i:05d}"
        items += [(keys.head(name), record), (keys.event(name, 1), event)]
    etcd = HttpTransport(EtcdConfig(machines=[endpoint]))
    try:
        for start in range(0, len(items), 128):
            ops = [wire.put(key, value) for key, value in items[start : start + 128]]
            etcd.send(0, wire.TxnRequest(success=ops), wire.TxnResponse, 30)
    finally:
        etcd.close()


def scrape(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as reply:
        body: bytes = reply.read()
    return time.perf_counter() - started, body


def gauge(body: bytes, name: str) -> float | None:
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def measure(endpoint: str, workdir: Path, program: str, nodes: int, scrapes: int) -> dict[str, str]:
    """Seed ``nodes`` nodes, start ``<program> exporter``, and time ``scrapes`` scrapes once
    its first refresh is in; the exporter is stopped (SIGTERM) before this returns."""
    seed(endpoint, program, nodes)
    config = workdir / f"{program}.yaml"
    config.write_text(json.dumps({"etcd": {"machines": [endpoint], "prefix": PREFIX}}))
    argv = [program, "--config", str(config), "exporter", "--listen", "127.0.0.1:0",
            "--every", "5", "--verify-every", "0"]  # fmt: skip
    exporter = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    prefix = program.replace("-", "_") + "_"
    try:
        assert exporter.stdout is not None
        url = exporter.stdout.readline().decode().split()[-1]
        deadline = time.monotonic() + 120
        while gauge(scrape(url)[1], f"{prefix}nodes") != nodes:
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: {program} exporter never served {nodes} nodes")
            time.sleep(0.5)
        times, body = [], b""
        for _ in range(scrapes):
            seconds, body = scrape(url)
            times.append(seconds)
        status = Path(f"/proc/{exporter.pid}/status").read_text()
        rss = next(line for line in status.splitlines() if line.startswith("VmRSS"))
        refresh = gauge(body, f"{prefix}refresh_duration_seconds") or 0.0
    finally:
        exporter.send_signal(signal.SIGTERM)
        exporter.communicate(timeout=30)
    return {
        "program": program,
        "nodes": f"{nodes:,}",
        "samples": f"{sum(1 for line in body.splitlines() if not line.startswith(b'#')):,}",
        "bytes": f"{len(body) / 2**20:.1f} MiB",
        "scrape (median)": f"{statistics.median(times) * 1000:.0f} ms",
        "scrape (max)": f"{max(times) * 1000:.0f} ms",
        "refresh": f"{refresh * 1000:.0f} ms",
        "exporter RSS": f"{int(rss.split()[1]) / 1024:.0f} MiB",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000, help="default 10,000")
    parser.add_argument("--scrapes", type=int, default=20, help="default 20")
    options = parser.parse_args()
    cluster = Cluster(1).start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for program in ("resource-gpu", "resource-storage"):
                rows.append(measure(cluster.endpoints[0], Path(tmp), program, options.nodes,
                                    options.scrapes))  # fmt: skip
    finally:
        cluster.stop()
    print(f"exporter at {options.nodes:,} nodes, {os.cpu_count()} CPUs; scrapes over HTTP\n")
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(row.values()) + " |")


if __name__ == "__main__":
    main()
