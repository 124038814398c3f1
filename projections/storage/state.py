"""A storage node's state, and the rules every write must keep: upstream's write-time checks,
which every append here runs inside its compare-and-swap.

:func:`validated` is the guard each write runs inside its compare-and-swap: it normalises the
record as upstream did (usage filled when missing, disks sorted by device, usage disks taking
their capacity's mounts, all-zero orphan usage disks dropped) and refuses a state that breaks a
rule, so that racing deploys cannot both take the last free volume.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest, NodeNotFound
from resource_extend.projections.storage.grammar.bindings import InvalidVolume
from resource_extend.projections.storage.grammar.disks import NO_QUOTA, Disk, Quota, add, fits
from resource_extend.projections.storage.grammar.sizes import MAX_SIZE
from resource_extend.projections.storage.wire.requests import InvalidStorage
from resource_extend.projections.storage.wire.resources import NodeResource, Volumes


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    """A node's capacity and usage, as its record holds them (values never mutated)."""

    capacity: NodeResource
    usage: NodeResource


class InvalidDiskQuota(InvalidRequest):
    """A disk's quota, or its usage, that breaks a rule (upstream's ``invalid disk``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}: invalid disk")


def existing(node: str, state: NodeState | None) -> NodeState:
    if state is None:
        raise NodeNotFound(node)
    return state


def validated(capacity: NodeResource | None, usage: NodeResource | None) -> NodeState:
    """The state to write, normalised; raises :class:`InvalidRequest` (the first broken rule,
    checked in upstream's order: volumes, storage, disks).

    Beyond upstream: usage of a path capacity lacks must not be negative either, no usage disk
    may be negative, a device is listed once in capacity, and every number fits an int64. As
    upstream, storage usage above capacity is allowed, and so is usage of a path capacity lacks.
    """
    if capacity is None:
        raise InvalidRequest("invalid capacity")
    if usage is None:
        usage = zero_usage(capacity)
    _check_volumes(capacity.volumes or {}, usage.volumes or {})
    _check_storage(capacity.storage, usage.storage)
    capacity_disks = _capacity_disks(capacity.disks or ())
    usage_disks = _usage_disks(capacity_disks, _summed(usage.disks or ()))
    return NodeState(
        capacity=NodeResource(
            volumes=_sorted(capacity.volumes),
            disks=None if capacity.disks is None else capacity_disks,
            storage=capacity.storage,
        ),
        usage=NodeResource(
            volumes=_sorted(usage.volumes),
            disks=None if usage.disks is None else usage_disks,
            storage=usage.storage,
        ),
    )


def zero_usage(capacity: NodeResource) -> NodeResource:
    """Usage of a new node: a 0 for every volume and a zero entry for every disk (both written
    empty, never ``null``, when capacity has none: upstream's validation makes them so)."""
    return NodeResource(
        volumes=dict.fromkeys(sorted(capacity.volumes or ()), 0),
        disks=[disk.with_quota(NO_QUOTA) for disk in capacity.disks or ()],
        storage=0,
    )


def _sorted(volumes: Volumes | None) -> Volumes | None:
    return None if volumes is None else dict(sorted(volumes.items()))


def _check_volumes(capacity: Volumes, usage: Volumes) -> None:
    for path in sorted(capacity):
        size = capacity[path]
        if size < 0:
            raise InvalidVolume(f"volume size should not be less than 0: {path} has {size}")
        if size > MAX_SIZE:
            raise InvalidVolume(f"volume size is over {MAX_SIZE}: {path} has {size}")
        used = usage.get(path)
        if used is not None and not 0 <= used <= size:
            raise InvalidVolume(f"invalid size in usage: {path} uses {used} of {size}")
    for path in sorted(usage.keys() - capacity.keys()):
        used = usage[path]
        if not 0 <= used <= MAX_SIZE:
            raise InvalidVolume(f"invalid size in usage: {path} (not in capacity) uses {used}")


def _check_storage(capacity: int, usage: int) -> None:
    if capacity < 0:
        raise InvalidStorage(f"storage capacity can't be negative: {capacity}")
    if usage < 0:
        raise InvalidStorage(f"storage usage can't be negative: {usage}")
    if max(capacity, usage) > MAX_SIZE:
        raise InvalidStorage(f"storage is over {MAX_SIZE}: capacity {capacity}, usage {usage}")


def _capacity_disks(disks: Iterable[Disk]) -> list[Disk]:
    ordered = sorted(disks, key=lambda disk: disk.device)
    for index, disk in enumerate(ordered):
        if index and ordered[index - 1].device == disk.device:
            raise InvalidDiskQuota(f"disk {disk.device} is listed twice in capacity")
        if any(value < 0 for value in disk.quota):
            raise InvalidDiskQuota(f"disk IOPS / BPS can't be negative: {disk.text()}")
        if any(value > MAX_SIZE for value in disk.quota):
            raise InvalidDiskQuota(f"disk IOPS / BPS is over {MAX_SIZE}: {disk.text()}")
    return ordered


def _summed(disks: Iterable[Disk]) -> dict[str, Disk]:
    """Usage per device (entries for one device add up), sorted by device."""
    by_device: dict[str, Disk] = {}
    for disk in disks:
        was = by_device.get(disk.device)
        by_device[disk.device] = disk if was is None else was.with_quota(add(was.quota, disk.quota))
    return dict(sorted(by_device.items()))


def _usage_disks(capacity: list[Disk], usage: dict[str, Disk]) -> list[Disk]:
    """Usage disks, checked against capacity, with their capacity's mounts; an orphan (no
    such disk in capacity) is dropped when all zero and refused otherwise."""
    checked = dict(usage)
    for disk in capacity:
        used = usage.get(disk.device)
        if used is None:
            continue
        if any(value < 0 for value in used.quota):
            raise InvalidDiskQuota(f"disk IOPS / BPS can't be negative: usage {used.text()}")
        if not fits(used.quota, disk.quota):
            raise InvalidDiskQuota(
                "disk IOPS / BPS usage can't be greater than capacity: "
                f"{disk.device} uses {_quota_text(used.quota)} of {_quota_text(disk.quota)}"
            )
        checked[disk.device] = msgspec.structs.replace(used, mounts=disk.mounts)
    served = {disk.device for disk in capacity}
    for device, used in usage.items():
        if device not in served:
            if used.quota != NO_QUOTA:
                raise InvalidDiskQuota(f"disk {device} not found in capacity")
            del checked[device]
    return list(checked.values())


def _quota_text(quota: Quota) -> str:
    return ":".join(map(str, quota))
