"""Disks: block devices with read/write IOPS and bytes/s quotas, and the paths they serve.

A volume path, or a mount binding's source, is charged to the disk whose mount is its longest
matching prefix (:func:`disk_for`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.sizes import MAX_SIZE, Int64, parse_size

Quota = tuple[int, int, int, int]
"""(read IOPS, write IOPS, read bytes/s, write bytes/s)."""

NO_QUOTA: Quota = (0, 0, 0, 0)

_INTEGER = re.compile(r"[+-]?[0-9]+")


class Disk(msgspec.Struct, frozen=True, kw_only=True):
    """A disk as the upstream record stores it (note the capital ``IOPS``)."""

    device: str
    mounts: list[str] | None = None
    read_iops: Int64 = msgspec.field(default=0, name="read_IOPS")
    write_iops: Int64 = msgspec.field(default=0, name="write_IOPS")
    read_bps: Int64 = 0
    write_bps: Int64 = 0

    @property
    def quota(self) -> Quota:
        return self.read_iops, self.write_iops, self.read_bps, self.write_bps

    def with_quota(self, quota: Iterable[int]) -> Disk:
        read_iops, write_iops, read_bps, write_bps = quota
        return msgspec.structs.replace(
            self,
            read_iops=read_iops,
            write_iops=write_iops,
            read_bps=read_bps,
            write_bps=write_bps,
        )

    def text(self) -> str:
        """``device:mount1,mount2:rIOPS:wIOPS:rBPS:wBPS``, the form an operator types."""
        return ":".join((self.device, ",".join(self.mounts or ()), *map(str, self.quota)))


class InvalidDisk(InvalidRequest):
    def __init__(self, text: str, cause: str) -> None:
        super().__init__(f"wrong disk format: {text}, {cause}: invalid disk")


def parse_disk(text: str) -> Disk:
    """``/dev/vda:/,/data0:1000:1000:1G:1G``: IOPS are plain integers, bytes/s human sizes."""
    parts = text.split(":")
    if len(parts) != 6:
        raise InvalidDisk(text, "invalid storage")  # upstream's cause, quirk and all
    device, mounts, read_iops, write_iops, read_bps, write_bps = parts
    if not (_INTEGER.fullmatch(read_iops) and _INTEGER.fullmatch(write_iops)):
        raise InvalidDisk(text, f"invalid IOPS: {read_iops!r}, {write_iops!r}")
    iops = [int(read_iops), int(write_iops)]
    if any(not -MAX_SIZE - 1 <= value <= MAX_SIZE for value in iops):  # as Go's ParseInt
        raise InvalidDisk(text, f"IOPS out of range: {read_iops!r}, {write_iops!r}")
    try:
        bps = [parse_size(read_bps), parse_size(write_bps)]
    except InvalidRequest as exc:
        raise InvalidDisk(text, exc.reason) from None
    return Disk(device=device, mounts=mounts.split(",")).with_quota((*iops, *bps))


def add(a: Quota, b: Quota) -> Quota:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]


def subtract(a: Quota, b: Quota) -> Quota:
    return a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]


def times(quota: Quota, n: int) -> Quota:
    return quota[0] * n, quota[1] * n, quota[2] * n, quota[3] * n


def fits(quota: Quota, left: Quota) -> bool:
    """Whether ``quota`` is within ``left``, figure by figure."""
    return (
        left[0] >= quota[0] and left[1] >= quota[1] and left[2] >= quota[2] and left[3] >= quota[3]
    )


class Mounts:
    """Which disk serves a path: every mount ends in ``/``, and the deepest mount that
    prefixes ``path + "/"`` decides (``/database`` is served by ``/``, not ``/data``). A
    mount two disks share belongs to the later one."""

    def __init__(self, disks: Sequence[Disk]) -> None:
        owner: dict[str, str] = {}
        for disk in disks:
            for mount in disk.mounts or ():
                owner[mount.rstrip("/") + "/"] = disk.device
        self._ordered = sorted(owner.items(), key=lambda item: -item[0].count("/"))

    def disk_for(self, path: str) -> str | None:
        """The device serving ``path``, or None when no mount covers it."""
        probe = path + "/"
        for mount, device in self._ordered:
            if probe.startswith(mount):
                return device
        return None
