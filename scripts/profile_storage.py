"""resource-storage's placement in-process, without etcd: the node states and requests of the
bounded-work cases, timed (``--profile`` prints cProfile's top entries).

    .venv/bin/python -m scripts.profile_storage [case ...] [--profile]

Cases: ``varied`` (100 varied bindings over 400 nodes of 8 volumes), ``varied1000`` (1,000
bindings over the same nodes), ``deploy`` (calculate-deploy of 200 with 1,000 bindings on
1,000 volumes), ``fleet`` (the bench's 2-binding request over 10,000 nodes of 4 volumes),
``varied10k``/``varied1000_10k`` (the varied requests over 10,000 nodes).
"""

from __future__ import annotations

import cProfile
import pstats
import random
import sys
import time
from collections.abc import Callable

import msgspec

from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.placement.capacity import nodes_deploy_capacity
from resource_extend.projections.storage.placement.plans import calculate_deploy
from resource_extend.projections.storage.wire.requests import WorkloadRequestWire, workload_request
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadRequest

G = 2**30
T = 2**40
BOUND = 10_000
"""Core's default ``scheduler.max_deploy_count``."""

Node = tuple[str, NodeResource, NodeResource]


def node(volumes: int, used: int, seed: int) -> tuple[NodeResource, NodeResource]:
    """``volumes`` of 1 TiB on one disk with quota, the first ``used`` partly used."""
    rng = random.Random(seed)
    paths = [f"/data{i}" for i in range(volumes)]
    usage = {p: (rng.randrange(1, T // 2) if i < used else 0) for i, p in enumerate(paths)}
    disk = Disk(device="/dev/vda", mounts=["/"]).with_quota((10**7, 10**7, 100 * T, 100 * T))
    zero = Disk(device="/dev/vda", mounts=["/"])
    capacity = NodeResource(volumes=dict.fromkeys(paths, T), disks=[disk], storage=volumes * T)
    return capacity, NodeResource(volumes=usage, disks=[zero], storage=sum(usage.values()))


def nodes(count: int, volumes: int) -> list[Node]:
    return [(f"node-{i:05d}", *node(volumes, i % (volumes + 1), i)) for i in range(count)]


def varied(count: int, seed: int = 7) -> WorkloadRequest:
    """``count`` bindings: mostly small sized AUTO ones (some with IOPS), a few monopoly ones,
    unlimited ones and mounts, each at its own destination."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        kind = rng.choices(["normal", "io", "mono", "unlimited", "mount"], [50, 15, 5, 20, 10])[0]
        size = rng.choice([1, 2, 5, 10]) * 2**20
        if kind == "normal":
            texts.append(f"AUTO:/n{i}:rw:{size}")
        elif kind == "io":
            texts.append(f"AUTO:/n{i}:rw:{size}:10:10:1M:1M")
        elif kind == "mono":
            texts.append(f"AUTO:/m{i}:rwm:{size}")
        elif kind == "unlimited":
            texts.append(f"AUTO:/u{i}:rw")
        else:
            texts.append(f"/mnt/s{i}:/v{i}:rw:0:1:1:0:0")
    return workload_request(WorkloadRequestWire(volumes_request=texts, volumes_limit=texts))


def bench_request() -> WorkloadRequest:
    """scripts/bench_storage.py's request: a normal binding and a monopoly one."""
    texts = ["AUTO:/data:rw:10G", "AUTO:/exclusive:rwm:100G"]
    return workload_request(WorkloadRequestWire(volumes_request=texts, volumes_limit=texts))


def capacity_case(fleet: list[Node], request: WorkloadRequest) -> Callable[[], object]:
    def run() -> object:
        return nodes_deploy_capacity(fleet, request, BOUND).total

    return run


def deploy_case() -> Callable[[], object]:
    capacity, usage = node(1000, 500, 1)
    request = varied(1000)

    def run() -> object:
        answer = calculate_deploy(capacity, usage, request, 200, BOUND)
        return len(msgspec.json.encode(answer))

    return run


def cases() -> dict[str, Callable[[], Callable[[], object]]]:
    return {
        "varied": lambda: capacity_case(nodes(400, 8), varied(100)),
        "varied1000": lambda: capacity_case(nodes(400, 8), varied(1000)),
        "deploy": deploy_case,
        "fleet": lambda: capacity_case(nodes(10_000, 4), bench_request()),
        "varied10k": lambda: capacity_case(nodes(10_000, 8), varied(100)),
        "varied1000_10k": lambda: capacity_case(nodes(10_000, 8), varied(1000)),
    }


def main(argv: list[str]) -> None:
    profile = "--profile" in argv
    names = [a for a in argv if not a.startswith("--")] or ["varied", "varied1000", "deploy"]
    for name in names:
        run = cases()[name]()
        profiler = cProfile.Profile() if profile else None
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        result = run()
        if profiler is not None:
            profiler.disable()
        print(f"{name}: {time.perf_counter() - start:.2f} s -> {result}", flush=True)
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main(sys.argv[1:])
