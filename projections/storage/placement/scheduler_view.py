"""What the scheduler sees of a node (step 1 of upstream's placement) and of a request (step 2).

A node is a :class:`Host`: its volumes split into *used* and *unused* ones (unused means usage
exactly 0), each with its free bytes, and each disk's quota left. A request is its
:class:`Classes`: normal, monopoly, unlimited and mount bindings, in the order the scheduler
places them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

from resource_extend.projections.storage.grammar.bindings import Binding, InvalidVolume
from resource_extend.projections.storage.grammar.disks import (
    NO_QUOTA,
    Disk,
    Mounts,
    Quota,
    add,
    fits,
    subtract,
)
from resource_extend.projections.storage.wire.resources import NodeResource


class Host:
    """A node as the scheduler changes it: free bytes per volume path, the used and unused
    paths in upstream's list order, and the quota left per disk device.

    The two lists start sorted by (free bytes, path) and are never re-sorted: realloc changes
    free sizes in place, and upstream's later steps read the lists in that order.
    """

    __slots__ = ("_devices", "_disks", "_mounts", "free", "left", "unused", "used")

    def __init__(
        self,
        used: list[str],
        unused: list[str],
        free: dict[str, int],
        left: dict[str, Quota],
        disks: Sequence[Disk],
    ) -> None:
        self.used = used
        self.unused = unused
        self.free = free
        self.left = left
        self._disks = disks
        self._mounts: Mounts | None = None  # built on the first look-up: most requests need none
        self._devices: dict[str, str | None] = {}

    def disk_of(self, path: str) -> str | None:
        """The device serving ``path``; None stands for upstream's fresh all-zero disk."""
        try:
            return self._devices[path]
        except KeyError:
            if self._mounts is None:
                self._mounts = Mounts(self._disks)
            device = self._mounts.disk_for(path)
            found = device if device in self.left else None
            self._devices[path] = found
            return found

    def affords(self, path: str, quota: Quota) -> bool:
        """Whether the disk serving ``path`` has ``quota`` left."""
        device = self.disk_of(path)
        return fits(quota, NO_QUOTA if device is None else self.left[device])


def build_host(capacity: NodeResource, usage: NodeResource) -> Host:
    """The node's view: a capacity path missing from usage counts as usage 0 (validation fills
    usage for every capacity volume anyway); usage paths outside capacity are not volumes."""
    taken = usage.volumes or {}
    free: dict[str, int] = {}
    used: list[tuple[int, str]] = []
    unused: list[tuple[int, str]] = []
    for path, size in (capacity.volumes or {}).items():
        used_bytes = taken.get(path, 0)
        free[path] = size - used_bytes
        (unused if used_bytes == 0 else used).append((size - used_bytes, path))
    used.sort()
    unused.sort()
    disks = capacity.disks or []
    left = {disk.device: disk.quota for disk in disks}
    for disk in usage.disks or ():
        have = left.get(disk.device)
        if have is not None:
            left[disk.device] = subtract(have, disk.quota)
    return Host([p for _, p in used], [p for _, p in unused], free, left, disks)


class Classes(NamedTuple):
    """A request's bindings by how they are placed, each class in placing order: normal and
    monopoly by size, ties by canonical string (upstream's tie order is Go's random map order);
    mounts by canonical string. Mounts without quota charge nothing and never fail: they are
    kept apart (``bare_mounts``), only for the zero entries upstream lists for them in a plan."""

    normal: tuple[Binding, ...]
    mono: tuple[Binding, ...]
    unlimited: tuple[Binding, ...]
    mounts: tuple[Binding, ...]
    bare_mounts: tuple[Binding, ...]
    needs_scheduling: bool
    scheduled: bool
    mono_size: int
    mono_quota: Quota
    spends_quota: bool
    """Whether a normal pass charges any disk."""
    pass_quota: Quota
    """What a whole normal pass charges, all disks together."""
    profile: NormalProfile
    asked: int
    """Every binding's size, all classes together (capacity's Rate)."""
    """The normal bindings' sums and quota kinds, for the enumeration (:mod:`normal`)."""


def classify(bindings: Sequence[Binding]) -> Classes:
    """Raises :class:`InvalidVolume` for a scheduled binding with a negative size: it would
    grow its volume on every pass, and upstream's unbounded enumeration would never end."""
    return _classify(tuple(bindings))


@lru_cache(maxsize=64)
def _classify(bindings: tuple[Binding, ...]) -> Classes:
    normal, mono, unlimited, mounts, bare_mounts = [], [], [], [], []
    for binding in sorted(bindings, key=Binding.canonical):
        if binding.monopoly:
            mono.append(binding)
        elif binding.unlimited:
            unlimited.append(binding)
        elif binding.scheduled:
            if binding.size < 0:
                raise InvalidVolume(f"size can't be negative: {binding.canonical()}")
            normal.append(binding)
        elif binding.has_io:
            mounts.append(binding)
        else:
            bare_mounts.append(binding)
    normal.sort(key=_size)
    mono.sort(key=_size)
    mono_quota = pass_quota = NO_QUOTA
    for binding in mono:
        mono_quota = add(mono_quota, binding.quota)
    for binding in (*normal, *mounts):
        pass_quota = add(pass_quota, binding.quota)
    return Classes(
        tuple(normal),
        tuple(mono),
        tuple(unlimited),
        tuple(mounts),
        tuple(bare_mounts),
        needs_scheduling=any(b.needs_scheduling for b in bindings),
        scheduled=bool(normal or mono or unlimited),
        mono_size=sum(b.size for b in mono),
        mono_quota=mono_quota,
        spends_quota=bool(mounts) or any(b.has_io for b in normal),
        pass_quota=pass_quota,
        profile=NormalProfile(normal, mounts),
        asked=sum(b.size for b in bindings),
    )


class NormalProfile:
    """What the normal enumeration needs of the normal bindings, made once per request:
    running sums of their sizes and of each quota figure (binding ``i`` to ``j`` take
    ``sizes[j] - sizes[i]``), where each run of quota-free bindings ends, each quota's
    positions, and the quotas and (size, quota) pairs no other one makes redundant."""

    __slots__ = ("ceiling", "count", "least_quotas", "monotone", "positions", "quota_sums",
                 "sizes", "zero_until")  # fmt: skip

    def __init__(self, normal: Sequence[Binding], mounts: Sequence[Binding]) -> None:
        self.count = len(normal)
        self.monotone = all(value >= 0 for b in (*normal, *mounts) for value in b.quota)
        """Charges only add up (no negative quota): what the enumeration's shortcuts need."""
        self.sizes = [0]
        sums: list[list[int]] = [[0], [0], [0], [0]]
        self.positions: dict[Quota, list[int]] = {}
        for i, binding in enumerate(normal):
            self.sizes.append(self.sizes[-1] + binding.size)
            for figure, value in zip(sums, binding.quota, strict=True):
                figure.append(figure[-1] + value)
            self.positions.setdefault(binding.quota, []).append(i)
        self.quota_sums = (sums[0], sums[1], sums[2], sums[3])
        self.zero_until = [self.count] * (self.count + 1)
        for i in range(self.count - 1, -1, -1):
            self.zero_until[i] = self.zero_until[i + 1] if normal[i].quota == NO_QUOTA else i
        least: list[Quota] = []
        for quota in sorted(self.positions, key=sum):  # what is below a quota sums to less
            if not any(fits(other, quota) for other in least):
                least.append(quota)
        self.least_quotas = tuple(least)
        """The quotas no other one is within: a disk that affords none of these affords none."""
        self.ceiling = _strongest(
            {(b.size, b.quota if b.has_io else None) for b in normal if b.size > 0}
        )
        """(size, quota or None: any volume) pairs whose ⌊free / size⌋ over the volumes
        that afford the quota is least: no other pair is as large with a quota as large."""

    def quota_of(self, start: int, end: int) -> Quota:
        """What bindings ``start`` to ``end`` (excluded) charge together."""
        a, b, c, d = self.quota_sums
        return a[end] - a[start], b[end] - b[start], c[end] - c[start], d[end] - d[start]


def _strongest(pairs: set[tuple[int, Quota | None]]) -> tuple[tuple[int, Quota | None], ...]:
    def covers(a: tuple[int, Quota | None], b: tuple[int, Quota | None]) -> bool:
        return a[0] >= b[0] and (b[1] is None or (a[1] is not None and fits(b[1], a[1])))

    # a pair that covers another comes first: larger, or as large with a larger quota
    ordered = sorted(pairs, key=lambda p: (-p[0], p[1] is None, -sum(p[1] or NO_QUOTA)))
    kept: list[tuple[int, Quota | None]] = []
    for pair in ordered:
        if not any(covers(other, pair) for other in kept):
            kept.append(pair)
    return tuple(kept)


def _size(binding: Binding) -> int:
    return binding.size


def go_search(n: int, ok: Callable[[int], bool]) -> int:
    """Go's ``sort.Search`` (the first index where ``ok`` holds, by bisection): the promotion
    step uses it on the unused list, which realloc may have left out of order."""
    low, high = 0, n
    while low < high:
        middle = (low + high) // 2
        if ok(middle):
            high = middle
        else:
            low = middle + 1
    return low
