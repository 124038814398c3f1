"""resource-storage's rows of ``scripts/bench``: its read and write verbs against etcdctl, as
for GPU; capacity of AUTO + monopoly bindings over 10,000 nodes, a deploy on a node with 1,000
volumes, and a deploy of 1,000 workloads of 1,024 mount bindings (the largest answer allowed),
each against core's 30 s call timeout (goal: under 1 s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from resource_extend.ledger.store.keys import KeyLayout
from scripts.benching import Pair, peak_memory_kib, side_by_side

if TYPE_CHECKING:
    from scripts.benching import Bench

PROGRAM = "resource-storage"
PREFIX = "/bench-storage"
G = 2**30
T = 2**40
REQUEST = {
    "volumes-request": ["AUTO:/data:rw:10G", "AUTO:/exclusive:rwm:100G"],
    "volumes-limit": ["AUTO:/data:rw:10G", "AUTO:/exclusive:rwm:100G"],
}
"""A normal binding and a monopoly one: the scheduler's costliest common case."""


def upstream_record(volumes: int, used: int) -> bytes:
    """A node record as the upstream plugin writes it: ``volumes`` of 1 TiB, the first
    ``used`` of them a quarter used, one disk."""
    paths = [f"/data{i}" for i in range(volumes)]
    usage = {p: (T // 4 if i < used else 0) for i, p in enumerate(paths)}
    disk = {"device": "/dev/vda", "mounts": ["/"], "read_IOPS": 10000, "write_IOPS": 10000,
            "read_bps": 10 * G, "write_bps": 10 * G}  # fmt: skip
    zero = {**disk, "read_IOPS": 0, "write_IOPS": 0, "read_bps": 0, "write_bps": 0}
    record = {
        "capacity": {"volumes": dict.fromkeys(paths, T), "disks": [disk], "storage": volumes * T},
        "usage": {"volumes": usage, "disks": [zero], "storage": sum(usage.values())},
    }
    return json.dumps(record, separators=(",", ":")).encode()


WORKLOAD = {"volume_plan_request": {"AUTO:/data:rw:1:0:0:0:0": {"/data0": 1}}, "storage_request": 1}
"""A workload's resource, as the write rows take it and give it back."""


def seeded(bench: Bench) -> Path:
    """The config of a prefix holding node ``short`` (four volumes, two a quarter used), its
    helper started."""
    config = bench.config_for(PREFIX)
    bench.put_all([(KeyLayout(PREFIX, "storage").head("short"), upstream_record(4, 2))])
    bench.warm_up(config, PROGRAM)
    return config


def storage_rows(bench: Bench, counts: list[int]) -> dict[str, int | None]:
    config = seeded(bench)
    keys = KeyLayout(PREFIX, "storage")
    read_goal, write_goal = bench.call_goals
    read = bench.call("get-node-resource-info", {"nodename": "short"}, config, PROGRAM)
    get = bench.ctl("get", keys.head("short").decode())
    bench.compare(f"{PROGRAM} read: get-node-resource-info", read, get, "etcdctl get", read_goal)
    rss = {"storage read": peak_memory_kib(read)}
    take = {"nodename": "short", "workloads_resource": [WORKLOAD], "delta": True, "incr": True}
    write = bench.call("set-node-resource-usage", take, config, PROGRAM)
    put = bench.ctl("put", f"{PREFIX}/scratch", "x")
    bench.compare(f"{PROGRAM} write: set-node-resource-usage", write, put, "etcdctl put",
                  write_goal)  # fmt: skip
    rss["storage write"] = peak_memory_kib(write)
    # The node was seeded as the upstream plugin writes it, whose record names no stream end:
    # the read above took a second round trip to find it. Written by this plugin now, it takes
    # one, as the GPU read does (``ledger.store.records``).
    bench.compare(f"{PROGRAM} read, once this plugin has written the node", read, get,
                  "etcdctl get", read_goal)  # fmt: skip

    for count in counts:
        prefix = f"{PREFIX}-fleet-{count}"
        fleet = KeyLayout(prefix, "storage")
        names = [f"storage-node-{i:05d}" for i in range(count)]
        bench.put_all([(fleet.head(n), upstream_record(4, i % 3)) for i, n in enumerate(names)])
        fleet_config = bench.config_for(prefix)
        bench.warm_up(fleet_config, PROGRAM)
        request = {"nodenames": names, "workload_resource": REQUEST}
        capacity = bench.call("get-nodes-deploy-capacity", request, fleet_config, PROGRAM)
        scan = bench.ctl("get", "--prefix", fleet.root.decode())
        pair = Pair(*side_by_side(bench.repeat, capacity, scan))
        rss[f"storage {count:,} nodes"] = peak_memory_kib(capacity)
        what = f"{PROGRAM} get-nodes-deploy-capacity (AUTO + monopoly), {count:,} nodes"
        if count <= 1_000:
            bench.row(what, pair, "etcdctl get --prefix, same records", 2.0)
        else:
            bench.limit_row(what, pair, "etcdctl get --prefix, same records", 1.0)

    bench.put_all([(keys.head("wide"), upstream_record(1000, 500))])
    get_wide = bench.ctl("get", keys.head("wide").decode())
    deploy = {"nodename": "wide", "deploy_count": 10, "workload_resource_request": REQUEST}
    few = bench.call("calculate-deploy", deploy, config, PROGRAM)
    pair = Pair(*side_by_side(bench.repeat, few, get_wide))
    rss["storage deploy, 1,000 volumes"] = peak_memory_kib(few)
    bench.limit_row(f"{PROGRAM} calculate-deploy of 10 on a node with 1,000 volumes", pair,
                    "etcdctl get, same record", 1.0)  # fmt: skip

    mounts = {"volumes": [f"/mnt/m{i}:/d{i}:rw" for i in range(1024)]}
    many = {"nodename": "wide", "deploy_count": 1000, "workload_resource_request": mounts}
    largest = bench.call("calculate-deploy", many, config, PROGRAM)
    pair = Pair(*side_by_side(3, largest, get_wide))
    rss["storage deploy, 1,000 x 1,024 bindings"] = peak_memory_kib(largest)
    bench.limit_row(f"{PROGRAM} calculate-deploy of 1,000 with 1,024 mount bindings (87 MB)",
                    pair, "etcdctl get, same record", 1.0)  # fmt: skip
    return rss
