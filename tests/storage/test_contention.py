"""Eight processes deploying and releasing volume and IOPS bindings on one node, without any
lock, as core's own sequence runs them: capacity, then calculate-deploy, then set usage (and
release by giving the workload back). Plans are made from states that other calls change before
the commit; the write-time guard runs inside each compare-and-swap, so the loser of a race for
the last free volume (or the last disk quota) is refused and writes nothing. No volume and no
disk quota is ever past its capacity, at any point of the stream.

Each racer is a process of its own, started once, that makes its calls in itself
(:meth:`Plugin.through`; through the binary and the helper in the resident mode): the race is
for etcd's compare-and-swap, which a call's own interpreter start adds nothing to. Started a
call at a time (240 interpreters on two cores), this test took 9 to 61 s with the load beside
it; now a few seconds."""

from __future__ import annotations

import multiprocessing
import queue
import random
import traceback
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from typing import Any

import msgspec
import pytest

from resource_extend.ledger.model import audit
from resource_extend.projections.storage.events import EVENTS
from resource_extend.projections.storage.node import STORAGE
from tests.etcdkv import Etcd
from tests.plugin import Plugin, failure_line
from tests.storage.helpers import G

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

WORKERS = 8
ROUNDS = 10
NODE = "hot"
REQUESTS = [
    {"volumes-request": ["AUTO:/data:rw:3G"], "volumes-limit": ["AUTO:/data:rw:3G"]},
    {"volumes-request": ["AUTO:/whole:rwm:1G"], "volumes-limit": ["AUTO:/whole:rwm:1G"]},
    {
        "volumes-request": ["AUTO:/fast:rw:1G:30:30:0:0"],
        "volumes-limit": ["AUTO:/fast:rw:1G:30:30:0:0"],
    },
    {"volumes": ["/mnt/logs:/logs:rw:0:20:0:0:0"], "storage-request": "1G"},
]
"""A normal binding, a monopoly one (a whole volume), one with disk quota, and a mount charging
its disk's quota: all race for the same four volumes and 100 read IOPS."""


@dataclass
class Tally:
    deployed: int = 0
    refused: int = 0
    released: int = 0
    held: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def usage_call(storage: Plugin, workload: dict[str, Any], incr: bool) -> Any:
    return storage.through(
        "set-node-resource-usage",
        {"nodename": NODE, "workloads_resource": [workload], "delta": True, "incr": incr},
    )


def racer(storage: Plugin, seed: int, start: Barrier, results: Any) -> None:
    """One racing process: its tally, or the failure that ended it, on ``results``."""
    try:
        results.put(worker(storage, seed, start))
    except BaseException:
        results.put(traceback.format_exc())


def worker(storage: Plugin, seed: int, start: Barrier) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    start.wait()
    for _ in range(ROUNDS):
        if tally.held and rng.random() < 0.35:
            workload = tally.held.pop(rng.randrange(len(tally.held)))
            released = usage_call(storage, workload, incr=False)
            assert released.status == 0, released.stderr  # giving back never fails
            tally.released += 1
            continue
        request = rng.choice(REQUESTS)
        capacity = storage.through(
            "get-nodes-deploy-capacity", {"nodenames": [NODE], "workload_resource": request}
        ).answer
        if NODE not in capacity["nodes_deploy_capacity_map"]:
            continue
        planned = storage.through(
            "calculate-deploy",
            {"nodename": NODE, "deploy_count": 1, "workload_resource_request": request},
        )
        if planned.status != 0:  # the node filled up between the two reads
            line = failure_line(planned, "calculate-deploy", "resource-storage")
            assert "not enough" in line, line
            continue
        workload = planned.answer["workloads_resource"][0]
        committed = usage_call(storage, workload, incr=True)
        if committed.status == 0:
            tally.deployed += 1
            tally.held.append(workload)
        else:  # lost the race for the space or the quota: refused, nothing written
            line = failure_line(committed, "set-node-resource-usage", "resource-storage")
            tally.refused += 1
            if "usage can't be greater" not in line and "invalid size in usage" not in line:
                tally.errors.append(line)
    return tally


def within(state: dict[str, Any]) -> list[str]:
    """Every way a state's usage is past its capacity (volumes, disk quotas) or below zero."""
    found = []
    capacity, usage = state["capacity"], state["usage"]
    for path, used in (usage["volumes"] or {}).items():
        size = (capacity["volumes"] or {}).get(path)
        if used < 0 or (size is not None and used > size):
            found.append(f"{path}: {used} of {size}")
    limits = {d["device"]: d for d in capacity["disks"] or ()}
    for disk in usage["disks"] or ():
        for key in ("read_IOPS", "write_IOPS", "read_bps", "write_bps"):
            if disk[key] < 0 or disk[key] > limits[disk["device"]][key]:
                found.append(
                    f"{disk['device']} {key}: {disk[key]} of {limits[disk['device']][key]}"
                )
    return found


def test_racing_deploys_never_oversubscribe_a_volume_or_a_disk(storage: Plugin) -> None:
    storage.ok(
        "add-node",
        {
            "nodename": NODE,
            "resource": {
                "volumes": ["/data0:10G", "/data1:10G", "/data2:10G", "/data3:10G"],
                "disks": ["/dev/vda:/:100:100:1G:1G"],
            },
        },
    )
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no lock held by a thread
    start, results = spawn.Barrier(WORKERS), spawn.Queue()
    racers = [
        spawn.Process(target=racer, args=(storage, seed, start, results)) for seed in range(WORKERS)
    ]
    for process in racers:
        process.start()
    try:
        tallies = [results.get(timeout=240) for _ in racers]
    except queue.Empty:
        raise AssertionError("a racer gave no answer in 240 s") from None
    finally:
        for process in racers:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    failures = [found for found in tallies if isinstance(found, str)]
    assert not failures, failures[0]
    tallies = [found for found in tallies if isinstance(found, Tally)]

    assert not [line for t in tallies for line in t.errors]
    deployed = sum(t.deployed for t in tallies)
    refused = sum(t.refused for t in tallies)
    assert deployed > 0

    # Every state the stream went through is within capacity (folded here, event by event).
    etcd = Etcd(storage.endpoints, storage.prefix, "storage")
    try:
        events = [EVENTS.decode(kv.value) for kv in etcd.events(NODE)]
    finally:
        etcd.close()
    assert len(events) == 1 + deployed + sum(t.released for t in tallies)
    for event, state in zip(events, audit.states(STORAGE, events), strict=True):
        assert state is not None
        assert within(msgspec.to_builtins(state)) == [], f"after event {event.seq}"

    assert refused > 0, "no commit lost a race: the guard went untested (rerun, or add rounds)"

    # The node holds exactly what the surviving workloads hold: nothing lost, nothing doubled.
    held = [w for t in tallies for w in t.held]
    info = storage.ok("get-node-resource-info", {"nodename": NODE, "workloads_resource": held})
    assert info["diffs"] == []
    assert info["usage"]["storage"] == sum(w["storage_request"] for w in held)
    assert sum(info["usage"]["volumes"].values()) <= 40 * G
    verified = storage.run("verify", None, "--all")
    assert verified.status == 0, verified.stdout + verified.stderr
