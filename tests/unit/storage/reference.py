"""An unbounded, literal model of upstream's placement and realloc affinity.

It is the oracle of the differential tests: written straight from upstream's algorithm, one pass at
a time, with the state upstream keeps (a host of mutable volumes and disks, a scratch copy per
computation, a heap rebuilt on every pass), and none of the scheduler's shortcuts (no bound on the
normal enumeration, no batching, no upper bounds in the promotion loop). Only Go's map order is
replaced by our deterministic rules: bindings of one class ordered by (size, canonical string), the
monopoly remainder to the first of them, anything else by canonical string.

Plans come back as ``(volume plan, disk plan)``, the disk plan holding every entry upstream's
``Disks.Add`` made, zero ones and device ``""`` included, sorted by device: what
:class:`schedule.Plan` holds.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Sequence

from resource_extend.projections.storage.grammar.bindings import Binding, parse_binding
from resource_extend.projections.storage.grammar.disks import Mounts
from resource_extend.projections.storage.wire.resources import NodeResource, VolumePlan

RefPlan = tuple[VolumePlan, dict[str, tuple[int, int, int, int]]]


class Failed(Exception):
    """The model's only error: the kind (``space``, ``iops``, ``invalid``, ``resource``)."""


class Volume:
    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size


class Host:
    """Used and unused volumes (kept in their lists' order) and the disks' quota left."""

    def __init__(self, capacity: NodeResource, usage: NodeResource, bound: int) -> None:
        self.bound = bound
        taken = usage.volumes or {}
        self.used: list[Volume] = []
        self.unused: list[Volume] = []
        for path, size in (capacity.volumes or {}).items():
            used = taken.get(path, 0)
            if used == 0:
                self.unused.append(Volume(path, size))
            else:
                self.used.append(Volume(path, size - used))
        self.used.sort(key=lambda v: (v.size, v.path))
        self.unused.sort(key=lambda v: (v.size, v.path))
        self.disks: dict[str, list[int]] = {
            disk.device: list(disk.quota) for disk in capacity.disks or ()
        }
        for disk in usage.disks or ():
            if disk.device in self.disks:
                left = self.disks[disk.device]
                for i, value in enumerate(disk.quota):
                    left[i] -= value
        self.mounts = Mounts(capacity.disks or [])

    def disk(self, path: str) -> tuple[str, list[int]]:
        """The disk serving ``path``: a fresh all-zero one (device "") when none does."""
        device = self.mounts.disk_for(path)
        if device is None or device not in self.disks:
            return "", [0, 0, 0, 0]
        return device, self.disks[device]

    def volume(self, path: str) -> Volume | None:
        for volume in self.used + self.unused:
            if volume.path == path:
                return volume
        return None


def _fits(left: list[int], quota: Sequence[int]) -> bool:
    return all(have >= want for have, want in zip(left, quota, strict=True))


def _take(left: list[int], quota: Sequence[int], sign: int = 1) -> None:
    for i, value in enumerate(quota):
        left[i] -= sign * value


def _charge(plan: dict[str, list[int]], device: str, quota: Sequence[int]) -> None:
    entry = plan.setdefault(device, [0, 0, 0, 0])
    for i, value in enumerate(quota):
        entry[i] += value


def _classify(
    bindings: Sequence[Binding],
) -> tuple[list[Binding], list[Binding], list[Binding], list[Binding]]:
    normal, mono, unlimited, mounts = [], [], [], []
    for binding in sorted(bindings, key=Binding.canonical):
        if binding.scheduled and "m" in binding.flags:
            mono.append(binding)
        elif binding.scheduled and binding.size == 0 and not any(binding.quota):
            unlimited.append(binding)
        elif binding.scheduled:
            normal.append(binding)
        else:
            mounts.append(binding)
    normal.sort(key=lambda b: b.size)  # stable: equal sizes stay by canonical string
    mono.sort(key=lambda b: b.size)
    return normal, mono, unlimited, mounts


def _needs_scheduling(bindings: Sequence[Binding]) -> bool:
    return any(b.scheduled or any(q > 0 for q in b.quota) for b in bindings)


class Scheduler:
    def __init__(self, host: Host) -> None:
        self.host = host

    def normal_pass(self, normal: list[Binding]) -> tuple[VolumePlan, dict[str, list[int]]]:
        """One workload's normal bindings, best fit on the used volumes; raises on failure
        and keeps the partial deductions, as upstream's scratch state does."""
        plan: VolumePlan = {}
        disks: dict[str, list[int]] = {}
        heap = [(v.size, v.path, v) for v in self.host.used]
        heapq.heapify(heap)
        for binding in normal:
            popped = []
            placed = False
            while heap:
                item = heapq.heappop(heap)
                volume = item[2]
                device, left = self.host.disk(volume.path)
                popped.append(volume)
                if volume.size < binding.size or not _fits(left, binding.quota):
                    continue
                _take(left, binding.quota)
                volume.size -= binding.size
                plan[binding.canonical()] = {volume.path: binding.size}
                _charge(disks, device, binding.quota)
                placed = True
                break
            for volume in popped:
                heapq.heappush(heap, (volume.size, volume.path, volume))
            if not placed:
                raise Failed("resource")
        return plan, disks

    def mount_pass(self, mounts: list[Binding]) -> dict[str, list[int]]:
        disks: dict[str, list[int]] = {}
        for binding in mounts:
            device, left = self.host.disk(binding.source)
            if not _fits(left, binding.quota):
                raise Failed("resource")
            _take(left, binding.quota)
            _charge(disks, device, binding.quota)
        return disks

    def normal_plans(
        self, normal: list[Binding], mounts: list[Binding]
    ) -> list[tuple[VolumePlan, dict[str, list[int]]]]:
        if not normal and not any(any(q > 0 for q in m.quota) for m in mounts):
            return [({}, {}) for _ in range(self.host.bound)]
        plans: list[tuple[VolumePlan, dict[str, list[int]]]] = []
        while True:  # unbounded, as upstream
            try:
                plan, disks = self.normal_pass(normal)
                for device, quota in self.mount_pass(mounts).items():
                    _charge(disks, device, quota)
            except Failed:
                return plans
            plans.append((plan, disks))

    def mono_plan(
        self, mono: list[Binding], volume: Volume
    ) -> tuple[VolumePlan, dict[str, list[int]]]:
        total = sum(b.size for b in mono)
        quota = [sum(b.quota[i] for b in mono) for i in range(4)]
        if volume.size < total:
            raise Failed("space")
        device, left = self.host.disk(volume.path)
        if not _fits(left, quota):
            raise Failed("iops")
        whole = volume.size
        plan: VolumePlan = {}
        for binding in mono:
            share = int(float(binding.size) / float(total) * float(whole))
            plan[binding.canonical()] = {volume.path: share}
            volume.size -= share
        if volume.size != 0:
            plan[mono[0].canonical()][volume.path] += volume.size
            volume.size = 0
        _take(left, quota)
        disks: dict[str, list[int]] = {}
        _charge(disks, device, quota)
        return plan, disks

    def mono_plans(self, mono: list[Binding]) -> list[tuple[VolumePlan, dict[str, list[int]]]]:
        if not mono:
            return [({}, {}) for _ in range(self.host.bound)]
        plans = []
        for volume in self.host.unused:
            try:
                plans.append(self.mono_plan(mono, volume))
            except Failed:
                continue
        return plans

    def volume_plans(self, bindings: Sequence[Binding]) -> list[RefPlan]:
        host = self.host
        if not _needs_scheduling(bindings):
            return [({}, {}) for _ in range(host.bound)]
        normal, mono, unlimited, mounts = _classify(bindings)
        if normal + mono + unlimited and not host.used + host.unused:
            return []
        least = min((b.size for b in normal), default=None)

        def compute() -> tuple[list[tuple[VolumePlan, dict[str, list[int]]]], ...]:
            saved = (
                copy.deepcopy(host.used),
                copy.deepcopy(host.unused),
                copy.deepcopy(host.disks),
            )
            normal_plans = self.normal_plans(normal, mounts)
            mono_plans = self.mono_plans(mono)
            host.used, host.unused, host.disks = saved
            return normal_plans, mono_plans

        normal_plans, mono_plans = compute()
        while len(mono_plans) > len(normal_plans):
            if least is None:
                break
            p = go_search(len(host.unused), lambda i: host.unused[i].size >= least)
            if p == len(host.unused):
                break
            host.used.append(host.unused.pop(p))
            normal_plans, mono_plans = compute()
        best = min(len(normal_plans), len(mono_plans))

        unlimited_path = None
        if unlimited:
            volumes = copy.deepcopy(host.used + host.unused)
            by_path = {v.path: v for v in volumes}
            for plan, _ in normal_plans + mono_plans:
                for placed in plan.values():
                    for path, size in placed.items():
                        by_path[path].size -= size
            largest = volumes[0]
            for volume in volumes:
                if volume.size > largest.size:
                    largest = volume
            unlimited_path = largest.path

        result: list[RefPlan] = []
        for i in range(best):
            plan = {k: dict(v) for k, v in normal_plans[i][0].items()}
            _merge_plan(plan, mono_plans[i][0])
            if unlimited_path is not None:
                _merge_plan(plan, {b.canonical(): {unlimited_path: 0} for b in unlimited})
            disks: dict[str, list[int]] = {}
            for device, quota in [*normal_plans[i][1].items(), *mono_plans[i][1].items()]:
                _charge(disks, device, quota)
            result.append((plan, _as_plan(disks)))
        return result


def _merge_plan(plan: VolumePlan, more: VolumePlan) -> None:
    for key, placed in more.items():
        plan[key] = dict(placed)


def _as_plan(disks: dict[str, list[int]]) -> dict[str, tuple[int, int, int, int]]:
    return {d: (q[0], q[1], q[2], q[3]) for d, q in sorted(disks.items())}


def go_search(n: int, ok: Callable[[int], bool]) -> int:
    """Go's ``sort.Search``: a bisection that assumes ``ok`` turns true once and stays so."""
    i, j = 0, n
    while i < j:
        h = (i + j) // 2
        if not ok(h):
            i = h + 1
        else:
            j = h
    return i


def volume_plans(
    capacity: NodeResource, usage: NodeResource, bindings: Sequence[Binding], bound: int
) -> list[RefPlan]:
    return Scheduler(Host(capacity, usage, bound)).volume_plans(bindings)


def affinity_plan(
    capacity: NodeResource,
    usage: NodeResource,
    merged: Sequence[Binding],
    old_plan: VolumePlan,
    old_request: Sequence[Binding],
) -> RefPlan:
    """Realloc placement with affinity; raises :class:`Failed` where upstream returns an error."""
    host = Host(capacity, usage, 1)
    if not _needs_scheduling(merged):
        return {}, {}
    for binding in _classify(old_request)[3]:
        if any(q > 0 for q in binding.quota):
            device, left = host.disk(binding.source)
            if device == "":
                raise Failed("invalid")
            _take(left, binding.quota, -1)
    normal, mono, unlimited, mounts = _classify(merged)
    old = [(parse_binding(key), placed) for key, placed in sorted(old_plan.items())]
    for binding, placed in old:
        for path, size in placed.items():
            volume = host.volume(path)
            if volume is None:
                raise Failed("invalid")
            volume.size += size
        if not placed:
            raise Failed("invalid")
        if any(q > 0 for q in binding.quota):
            device, left = host.disk(min(placed))
            if device == "":
                raise Failed("invalid")
            _take(left, binding.quota, -1)

    plan: VolumePlan = {}
    disks: dict[str, list[int]] = {}
    queue: list[Binding] = []

    def old_path(binding: Binding) -> str | None:
        for was, placed in old:
            if was.key == binding.key:
                return min(placed)
        return None

    def keep(bindings: list[Binding]) -> None:
        for binding in bindings:
            path = old_path(binding)
            if path is None:
                queue.append(binding)
                continue
            volume = host.volume(path)
            assert volume is not None
            if binding.size > volume.size:
                raise Failed("space")
            volume.size -= binding.size
            plan[binding.canonical()] = {path: binding.size}
            if any(q > 0 for q in binding.quota):
                device, left = host.disk(path)
                if not _fits(left, binding.quota):
                    raise Failed("iops")
                _take(left, binding.quota)
                _charge(disks, device, binding.quota)

    for device, quota in Scheduler(host).mount_pass(mounts).items():
        _charge(disks, device, quota)
    keep(normal)
    if mono:
        matched = [b for b in mono if old_path(b) is not None]
        if not matched:
            queue.extend(mono)
        else:
            wanted = sum(b.size for b in mono)
            held = sum(sum(p.values()) for b, p in old if b.monopoly)
            if held < wanted:
                raise Failed("space")
            group_path = old_path(matched[0])
            assert group_path is not None
            volume = host.volume(group_path)
            assert volume is not None
            more, more_disks = Scheduler(host).mono_plan(mono, volume)
            _merge_plan(plan, more)
            for device, quota in more_disks.items():
                _charge(disks, device, quota)
    keep(unlimited)
    if queue:
        found = Scheduler(host).volume_plans(queue)
        if not found:
            raise Failed("resource")
        _merge_plan(plan, found[0][0])
        for device, charged in found[0][1].items():
            _charge(disks, device, charged)
    return plan, _as_plan(disks)
