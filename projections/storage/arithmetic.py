"""Adding and subtracting node resources: volumes per path, disks per device, storage.

Values are treated as immutable: every function builds a new :class:`NodeResource`. Volume maps
come out sorted by path (the order Go writes map keys in). Entries that reach exactly 0 stay:
a volume whose usage is exactly 0 is "unused" to the scheduler, and only a capacity change
drops emptied volumes (:func:`without_empty_volumes`).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.grammar.disks import add as add_quota
from resource_extend.projections.storage.grammar.disks import times as times_quota
from resource_extend.projections.storage.wire.resources import (
    NodeResource,
    Volumes,
    WorkloadResource,
)


def add(base: NodeResource, delta: NodeResource, sign: int = 1) -> NodeResource:
    """``base + sign * delta``. A disk of ``delta`` whose device ``base`` lacks is appended
    (negated when subtracting); one ``base`` has takes ``delta``'s mounts when it has some."""
    volumes = dict(base.volumes or {})
    for path, size in (delta.volumes or {}).items():
        volumes[path] = volumes.get(path, 0) + sign * size
    return NodeResource(
        volumes=dict(sorted(volumes.items())),
        disks=added_disks(base.disks or (), delta.disks or (), sign),
        storage=base.storage + sign * delta.storage,
    )


def subtract(base: NodeResource, delta: NodeResource) -> NodeResource:
    return add(base, delta, -1)


def added_disks(base: Iterable[Disk], delta: Iterable[Disk], sign: int = 1) -> list[Disk]:
    """Per device; a device ``delta`` lists twice counts twice (upstream appended both)."""
    disks: dict[str, Disk] = {}
    for disk in base:
        was = disks.get(disk.device)
        disks[disk.device] = (
            disk if was is None else was.with_quota(add_quota(was.quota, disk.quota))
        )
    for disk in delta:
        was = disks.get(disk.device)
        if was is None:
            disks[disk.device] = disk.with_quota(times_quota(disk.quota, sign))
        else:
            mounts = disk.mounts if disk.mounts else was.mounts
            quota = add_quota(was.quota, times_quota(disk.quota, sign))
            disks[disk.device] = msgspec.structs.replace(was.with_quota(quota), mounts=mounts)
    return list(disks.values())


def without_empty_volumes(resource: NodeResource) -> NodeResource:
    """Volumes whose capacity is exactly 0 dropped (a delta that took a volume's whole size
    removes it). The storage total is left as is: what was dropped was 0."""
    if not resource.volumes or all(resource.volumes.values()):
        return resource
    kept = {path: size for path, size in resource.volumes.items() if size != 0}
    return msgspec.structs.replace(resource, volumes=kept)


def volume_total(resource: NodeResource) -> int:
    return sum((resource.volumes or {}).values())


def workloads_usage(workloads: Iterable[WorkloadResource | None]) -> NodeResource:
    """What workloads charge their node: every path of their request plans, their storage
    requests and their disk quotas (mounts dropped: a node's disks keep their own). A ``null``
    workload charges nothing."""
    volumes: Volumes = {}
    disks: list[Disk] = []
    storage = 0
    for workload in workloads:
        if workload is None:
            continue
        for planned in workload.volume_plan_request.values():
            for path, size in planned.items():
                volumes[path] = volumes.get(path, 0) + size
        disks += (
            msgspec.structs.replace(disk, mounts=None) for disk in workload.disks_request or ()
        )
        storage += workload.storage_request
    return NodeResource(
        volumes=dict(sorted(volumes.items())), disks=added_disks((), disks), storage=storage
    )
