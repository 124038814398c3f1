"""Nodes and helpers the scheduler tests share: upstream's fixtures S and F4, and the
checks upstream's schedule tests make on every answer."""

from __future__ import annotations

from collections.abc import Sequence

from resource_extend.projections.storage.grammar.bindings import Binding, parse_binding
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.placement.schedule import Plan
from resource_extend.projections.storage.wire.resources import NodeResource

G = 2**30
T = 2**40
M = 2**20

VDA = Disk(device="/dev/vda", mounts=["/", "/data"]).with_quota((1000, 1000, G, G))
VDB = Disk(device="/dev/vdb", mounts=["/data1"]).with_quota((0, 0, G, G))

S_CAPACITY = NodeResource(
    volumes={"/data0": T, "/data1": T, "/data2": T, "/data3": T}, disks=[VDA, VDB], storage=4 * T
)
"""Upstream's schedule-test node: four 1 TiB volumes; vda serves /data0, /data2 and /data3
(``/data0`` does not match the mount ``/data``), vdb serves /data1 with no IOPS."""

S_USAGE = NodeResource(
    volumes={"/data0": 200 * G, "/data1": 300 * G, "/data2": 0, "/data3": 0},
    disks=[
        Disk(device="/dev/vda", mounts=["/", "/data"]),
        Disk(device="/dev/vdb", mounts=["/data1"]),
    ],
)

F4_CAPACITY = NodeResource(
    volumes={"/data0": T, "/data1": T, "/data2": T, "/data3": T}, disks=[], storage=4 * T
)
"""Upstream's verb-test node: four 1 TiB volumes, storage 4 TiB, nothing used."""

F4_USAGE = NodeResource(
    volumes={"/data0": 0, "/data1": 0, "/data2": 0, "/data3": 0}, disks=[], storage=0
)


def bindings(*texts: str) -> list[Binding]:
    return [parse_binding(text) for text in texts]


def placements(plan: Plan) -> dict[str, tuple[str, int]]:
    """``{destination: (path, bytes)}``: plans are easier to read by destination."""
    found = {}
    for key, placed in plan.volumes.items():
        ((path, size),) = placed.items()
        found[parse_binding(key).destination] = (path, size)
    return found


def applied(usage: NodeResource, plans: Sequence[Plan]) -> NodeResource:
    """``usage`` with every plan charged, as core commits them."""
    volumes = dict(usage.volumes or {})
    disks = {disk.device: disk for disk in usage.disks or ()}
    for plan in plans:
        for placed in plan.volumes.values():
            for path, size in placed.items():
                volumes[path] = volumes.get(path, 0) + size
        for device, quota in plan.disks.items():
            was = disks.get(device, Disk(device=device))
            disks[device] = was.with_quota(a + b for a, b in zip(was.quota, quota, strict=True))
    return NodeResource(volumes=volumes, disks=list(disks.values()), storage=usage.storage)


def usage_is_valid(capacity: NodeResource, usage: NodeResource) -> bool:
    """No volume and no disk quota used past its capacity, nothing below zero."""
    volumes = capacity.volumes or {}
    if any(not 0 <= used <= volumes.get(path, 0) for path, used in (usage.volumes or {}).items()):
        return False
    limits = {disk.device: disk.quota for disk in capacity.disks or ()}
    return all(
        0 <= used <= limit
        for disk in usage.disks or ()
        for used, limit in zip(disk.quota, limits.get(disk.device, (0, 0, 0, 0)), strict=True)
    )
