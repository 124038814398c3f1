"""Upstream's placement algorithm: how many copies of a request's volume bindings a node can
host, and where each copy goes.

Upstream's steps, kept exactly: normal bindings go best fit onto *used* volumes, one pass per
copy, until a pass fails; monopoly groups each take a whole *unused* volume; while the
monopoly side could host more copies than the normal side, the smallest unused volume that
can hold the smallest normal binding is promoted to the used list and everything is computed
again; unlimited bindings all go onto the volume with the most space left once *every*
enumerated plan is subtracted. A failed normal pass keeps its partial disk charges, so the
monopoly step sees less quota (the scratch-state coupling).

Bounded work without changing any result: the normal enumeration runs in batches
of identical passes (:mod:`normal`), and it stops at the number of passes anything can still
use (``bound`` without monopoly bindings, the monopoly count with them) unless the monopoly
step or the unlimited placement needs the state after the last pass. The promotion loop
(:mod:`promotion`) skips the computation for steps where cheap bounds already show that the
loop goes on. The monopoly step is in :mod:`monopoly`.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from resource_extend.projections.storage.grammar.bindings import Binding
from resource_extend.projections.storage.grammar.disks import NO_QUOTA, Quota, add
from resource_extend.projections.storage.placement.monopoly import shares
from resource_extend.projections.storage.placement.normal import Enumeration
from resource_extend.projections.storage.placement.promotion import Promotion
from resource_extend.projections.storage.placement.scheduler_view import (
    Classes,
    Host,
    build_host,
    classify,
)
from resource_extend.projections.storage.wire.resources import NodeResource, VolumePlan


class Plan(msgspec.Struct, frozen=True):
    """One workload's placement: ``volumes`` maps each scheduled binding (canonical string) to
    ``{path: bytes}``; ``disks`` maps a device to the quota charged to it.

    ``disks`` lists what upstream lists: an entry for the disk of every normal binding's path and,
    when the normal passes run, of every mount binding's source, quota or not (zero entries), and
    one for the disk of each monopoly volume; a path no disk covers gives device ``""``. Zero
    entries charge nothing; node usage drops them as empty orphans, as upstream's did.
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
        keys = [binding.canonical() for binding in classes.normal]
        for pattern, repeats in self._normal.runs:
            if len(parts) >= n:
                break
            volumes: VolumePlan = {}
            disks: dict[str, Quota] = {}
            start = 0
            for path, count in pattern:
                device = host.disk_of(path)
                for i in range(start, start + count):
                    binding = classes.normal[i]
                    volumes[keys[i]] = {path: binding.size}
                    list_charge(disks, device, binding.quota)
                start += count
            for binding in (*classes.mounts, *classes.bare_mounts):
                list_charge(disks, host.disk_of(binding.source), binding.quota)
            parts.extend([(volumes, disks)] * min(repeats, n - len(parts)))
        return parts

    def _add_mono(self, path: str, volumes: VolumePlan, disks: dict[str, Quota]) -> None:
        mono = self._classes.mono
        for binding, share in zip(mono, shares(mono, self._host.free[path]), strict=True):
            volumes[binding.canonical()] = {path: share}
        list_charge(disks, self._host.disk_of(path), self._classes.mono_quota)


def schedule(host: Host, bindings: Sequence[Binding] | Classes, bound: int) -> Schedule:
    """Upstream's placement algorithm on ``host`` (which is not changed); ``bindings`` may come
    classified already (:func:`classify`: a request placed on many nodes is classified once)."""
    classes = bindings if isinstance(bindings, Classes) else classify(bindings)
    if not classes.needs_scheduling:
        return Schedule(host, classes, bound, None, None, None)
    if classes.scheduled and not (host.used or host.unused):
        return Schedule(host, classes, 0, None, None, None)
    return Schedule(host, classes, *Promotion(host, classes, bound).run())


def list_charge(disks: dict[str, Quota], device: str | None, quota: Quota) -> None:
    """A plan's entry for ``device`` (``None``: no disk covers the path, upstream's device
    ``""``) takes ``quota``, zero or not: upstream's ``Disks.Add`` of one binding's charge."""
    listed = device or ""
    disks[listed] = add(disks.get(listed, NO_QUOTA), quota)
