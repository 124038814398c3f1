"""The placement algorithm (§2.8): how many copies of a request's volume bindings a node can
host, and where each copy goes.

Upstream's steps, kept exactly: normal bindings go best fit onto *used* volumes, one pass per
copy, until a pass fails; monopoly groups each take a whole *unused* volume; while the
monopoly side could host more copies than the normal side, the smallest unused volume that
can hold the smallest normal binding is promoted to the used list and everything is computed
again; unlimited bindings all go onto the volume with the most space left once *every*
enumerated plan is subtracted. A failed normal pass keeps its partial disk charges, so the
monopoly step sees less quota (the scratch-state coupling).

Bounded work (decision 4) without changing any result: the normal enumeration runs in batches
of identical passes (:mod:`normal`), and it stops at the number of passes anything can still
use (``bound`` without monopoly bindings, the monopoly count with them) unless the monopoly
step or the unlimited placement needs the state after the last pass. The promotion loop skips
the computation for steps where a cheap upper bound on the normal count already shows that
the loop goes on.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from resource_extend.projections.storage.bindings import Binding
from resource_extend.projections.storage.disks import NO_QUOTA, Quota
from resource_extend.projections.storage.host import (
    Classes,
    Host,
    add,
    build_host,
    classify,
    fits,
    go_search,
    subtract,
)
from resource_extend.projections.storage.normal import Enumeration, enumerate_normal
from resource_extend.projections.storage.resources import NodeResource, VolumePlan


class Plan(msgspec.Struct, frozen=True):
    """One workload's placement: ``volumes`` maps each scheduled binding (canonical string) to
    ``{path: bytes}``; ``disks`` maps a device to the quota charged to it.

    ``disks`` holds only devices that carry quota (decision 3, as resource-extend): upstream
    also lists zero entries for every normal and mount binding, and a device ``""`` entry for
    a path no disk covers; those charge nothing, so they are left out.
    """

    volumes: VolumePlan
    disks: dict[str, Quota]


def volume_plans(
    capacity: NodeResource, usage: NodeResource, bindings: Sequence[Binding], bound: int
) -> list[Plan]:
    """Every plan upstream's ``GetVolumePlans`` returns for ``bindings`` on this node: at most
    ``bound`` unless monopoly bindings decide (one per unused volume that fits them)."""
    found = schedule(build_host(capacity, usage), bindings, bound)
    return found.plans(found.count)


def plan_count(
    capacity: NodeResource, usage: NodeResource, bindings: Sequence[Binding], bound: int
) -> int:
    """``len(volume_plans(...))`` without building the plans."""
    return schedule(build_host(capacity, usage), bindings, bound).count


class Schedule:
    """The outcome on one host: ``count`` plans, built on demand (:meth:`plans`)."""

    def __init__(
        self,
        host: Host,
        classes: Classes,
        count: int,
        normal: Enumeration | None,
        mono: list[str] | None,
        unlimited_path: str | None,
    ) -> None:
        self.count = count
        self._host = host
        self._classes = classes
        self._normal = normal
        self._mono = mono
        self._unlimited_path = unlimited_path

    def plans(self, n: int) -> list[Plan]:
        """The first ``min(n, count)`` plans, in upstream's order."""
        n = min(n, self.count)
        normal = self._normal_parts(n)
        plans = []
        for i in range(n):
            volumes, disks = normal[i] if normal else ({}, {})
            volumes = {key: dict(placed) for key, placed in volumes.items()}
            disks = dict(disks)
            if self._mono is not None:
                self._add_mono(self._mono[i], volumes, disks)
            if self._unlimited_path is not None:
                for binding in self._classes.unlimited:
                    volumes[binding.canonical()] = {self._unlimited_path: 0}
            plans.append(Plan(volumes=volumes, disks=dict(sorted(disks.items()))))
        return plans

    def _normal_parts(self, n: int) -> list[tuple[VolumePlan, dict[str, Quota]]]:
        if self._normal is None:
            return []
        host, classes = self._host, self._classes
        parts: list[tuple[VolumePlan, dict[str, Quota]]] = []
        for pattern, repeats in self._normal.runs:
            if len(parts) >= n:
                break
            volumes: VolumePlan = {}
            disks: dict[str, Quota] = {}
            for binding, path in zip(classes.normal, pattern, strict=True):
                volumes[binding.canonical()] = {path: binding.size}
                _charge(disks, host.disk_of(path), binding.quota)
            for binding in classes.mounts:
                _charge(disks, host.disk_of(binding.source), binding.quota)
            parts.extend([(volumes, disks)] * min(repeats, n - len(parts)))
        return parts

    def _add_mono(self, path: str, volumes: VolumePlan, disks: dict[str, Quota]) -> None:
        mono = self._classes.mono
        for binding, share in zip(mono, shares(mono, self._host.free[path]), strict=True):
            volumes[binding.canonical()] = {path: share}
        _charge(disks, self._host.disk_of(path), self._classes.mono_quota)


def shares(mono: Sequence[Binding], whole: int) -> list[int]:
    """A monopoly group's split of a ``whole`` volume: each binding ⌊size / Σsizes * whole⌋ in
    float64 as upstream computes it, and what rounding leaves to the first (the smallest,
    ties by canonical string: decision 2), so that the shares add up to ``whole``."""
    total = sum(b.size for b in mono)
    split = [int(float(b.size) / float(total) * float(whole)) if total else 0 for b in mono]
    split[0] += whole - sum(split)
    return split


def _charge(disks: dict[str, Quota], device: str | None, quota: Quota) -> None:
    if device is not None and any(quota):
        disks[device] = add(disks.get(device, NO_QUOTA), quota)


def mono_volumes(
    host: Host, unused: Sequence[str], classes: Classes, left: dict[str, Quota]
) -> list[str]:
    """The unused volumes a monopoly group qualifies for, in list order, charging ``left``."""
    size, quota = classes.mono_size, classes.mono_quota
    free = host.free
    if not any(quota):
        return [path for path in unused if free[path] >= size]
    chosen = []
    for path in unused:
        if free[path] < size:
            continue
        device = host.disk_of(path)
        if not fits(quota, NO_QUOTA if device is None else left[device]):
            continue
        chosen.append(path)
        if device is not None:
            left[device] = subtract(left[device], quota)
    return chosen


class _Step:
    """One computation of steps 3-4 for a given used/unused split."""

    __slots__ = ("mono", "mono_count", "normal", "normal_count")

    def __init__(
        self, normal: Enumeration | None, normal_count: int, mono: list[str] | None, mono_count: int
    ) -> None:
        self.normal = normal
        self.normal_count = normal_count
        self.mono = mono
        self.mono_count = mono_count


def schedule(host: Host, bindings: Sequence[Binding], bound: int) -> Schedule:
    """§2.8 on ``host`` (which is not changed)."""
    classes = classify(bindings)
    if not classes.needs_scheduling:
        return Schedule(host, classes, bound, None, None, None)
    if classes.scheduled and not (host.used or host.unused):
        return Schedule(host, classes, 0, None, None, None)
    return _Promotion(host, classes, bound).run()


class _Promotion:
    """Step 5: promote unused volumes while the monopoly side outnumbers the normal side."""

    def __init__(self, host: Host, classes: Classes, bound: int) -> None:
        self.host = host
        self.classes = classes
        self.bound = bound
        self.has_normal = bool(classes.normal or classes.mounts)
        # The monopoly step depends on the whole normal enumeration only through disk quota.
        self.coupled = bool(classes.mono) and any(classes.mono_quota) and classes.spends_quota
        # Unlimited bindings are placed by what every normal pass takes, not only the first.
        self.full = self.coupled or bool(classes.unlimited)
        self.used = list(host.used)
        self.unused = list(host.unused)

    def run(self) -> Schedule:
        classes, host = self.classes, self.host
        least = classes.normal[0].size if classes.normal else None
        ceiling = _Ceiling(host, classes)
        for path in self.used:
            ceiling.add(path)
        while True:
            step = None
            if self.coupled or not classes.normal or self._mono_count() <= ceiling.value():
                step = self._compute(full=self.full)
                if step.mono_count <= step.normal_count:
                    break
            if least is None:
                break
            promoted = self._promotable(least)
            if promoted is None:
                break
            self.used.append(promoted)
            ceiling.add(promoted)
        if step is None:
            step = self._compute(full=self.full)
        count = min(step.normal_count, step.mono_count)
        return Schedule(host, classes, count, step.normal, step.mono, self._unlimited_path(step))

    def _promotable(self, least: int) -> str | None:
        """Takes the smallest unused volume that holds the smallest normal binding."""
        free, unused = self.host.free, self.unused
        p = go_search(len(unused), lambda i: free[unused[i]] >= least)
        return unused.pop(p) if p < len(unused) else None

    def _mono_count(self) -> int:
        if not self.classes.mono:
            return self.bound
        return len(mono_volumes(self.host, self.unused, self.classes, dict(self.host.left)))

    def _compute(self, *, full: bool) -> _Step:
        classes, host = self.classes, self.host
        left = dict(host.left)
        mono: list[str] | None = None
        if classes.mono and not self.coupled:
            mono = mono_volumes(host, self.unused, classes, left)
        normal: Enumeration | None = None
        if self.has_normal:
            limit = None if full else (self.bound if mono is None else len(mono))
            normal = enumerate_normal(host, self.used, classes.normal, classes.mounts, limit)
            left = normal.left if normal.exhausted else left
        if classes.mono and self.coupled:
            mono = mono_volumes(host, self.unused, classes, left)
        return _Step(
            normal,
            self.bound if normal is None else normal.count,
            mono,
            self.bound if mono is None else len(mono),
        )

    def _unlimited_path(self, step: _Step) -> str | None:
        """Step 6: the volume with the most bytes left after every normal and monopoly plan
        (not only the ones returned); the first such in used-then-unused order."""
        if not self.classes.unlimited:
            return None
        free = self.host.free
        taken = step.normal.taken if step.normal is not None else {}
        whole = set(step.mono or ())
        best_path, best_left = "", 0
        for i, path in enumerate([*self.used, *self.unused]):
            left = 0 if path in whole else free[path] - taken.get(path, 0)
            if i == 0 or left > best_left:
                best_path, best_left = path, left
        return best_path


class _Ceiling:
    """An upper bound on the normal count for the current used list, kept as volumes are
    promoted: every pass places each normal binding i (``size_i`` bytes, on a volume whose disk
    has its quota) and charges its quota and the mounts' to some disk."""

    def __init__(self, host: Host, classes: Classes) -> None:
        self.host = host
        self.normal = [(b.size, b.quota if b.has_io else None) for b in classes.normal]
        self.slots = [0] * len(self.normal)
        need = NO_QUOTA
        for binding in (*classes.normal, *classes.mounts):
            need = add(need, binding.quota)
        total = NO_QUOTA
        for left in host.left.values():
            total = add(total, left)
        bounds = [have // want for have, want in zip(total, need, strict=True) if want > 0]
        if any(host.disk_of(b.source) is None for b in classes.mounts):
            bounds.append(0)  # a mount with quota on no disk fails every pass
        self.fixed = min(bounds, default=None)

    def add(self, path: str) -> None:
        free = max(self.host.free[path], 0)
        for i, (size, quota) in enumerate(self.normal):
            if size > 0 and (quota is None or self.host.affords(path, quota)):
                self.slots[i] += free // size

    def value(self) -> int:
        bounds = [self.slots[i] for i, (size, _) in enumerate(self.normal) if size > 0]
        if self.fixed is not None:
            bounds.append(self.fixed)
        return min(bounds, default=2**63)
