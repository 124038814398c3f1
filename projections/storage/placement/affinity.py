"""Realloc placement with affinity: bindings a workload already has stay where they are.

The workload's old charges are given back first (every plan entry's bytes, and the quota of
each device it was charged to), so that the merged bindings are checked against the node as if
the workload were not on it. A binding whose (source, destination, flags) matches an old plan
entry then stays on that entry's path at its new full size; a monopoly group with any old
member is split again, new members included, over the first matched path; everything else is
placed by upstream's placement algorithm with bound 1 on what is left, and its first plan is taken.
"""

from __future__ import annotations

from collections.abc import Sequence

from resource_extend.ledger.model.errors import NotEnoughResource
from resource_extend.projections.storage.grammar.bindings import (
    Binding,
    InvalidVolume,
    parse_binding,
)
from resource_extend.projections.storage.grammar.disks import (
    NO_QUOTA,
    Disk,
    Quota,
    add,
    fits,
    subtract,
)
from resource_extend.projections.storage.placement.monopoly import shares
from resource_extend.projections.storage.placement.schedule import Plan, list_charge, schedule
from resource_extend.projections.storage.placement.scheduler_view import Host, build_host, classify
from resource_extend.projections.storage.wire.resources import NodeResource, VolumePlan


def affinity_plan(
    capacity: NodeResource,
    usage: NodeResource,
    merged: Sequence[Binding],
    old_plan: VolumePlan,
    old_disks: Sequence[Disk],
) -> Plan:
    """The new plan of a workload whose request bindings become ``merged``; ``old_plan`` and
    ``old_disks`` are its current ``volume_plan_request`` and ``disks_request``.

    Raises :class:`NotEnoughResource` when the merged bindings do not fit, and
    :class:`InvalidVolume` when the old plan names a path the node does not have. Upstream's
    map order is replaced by sorted order: old entries by their key string, bindings as
    :func:`classify` orders them.
    """
    if not any(binding.needs_scheduling for binding in merged):
        return Plan(volumes={}, disks={})
    host = build_host(capacity, usage)
    old = [(parse_binding(key), placed) for key, placed in sorted(old_plan.items())]
    _give_back(host, old, old_disks)
    return _Placement(host, old).place(merged)


def _give_back(
    host: Host, old: list[tuple[Binding, dict[str, int]]], old_disks: Sequence[Disk]
) -> None:
    """The workload's bytes back to the paths its plan names, and its quota back to the
    devices it was charged to. Upstream gave quota back to the disk serving each path *now*:
    after a remount, to a disk that was never charged (a plan past its quota then passed)."""
    for binding, placed in old:
        for path, size in placed.items():
            if path not in host.free:
                raise InvalidVolume(f"volume {path} not found")
            host.free[path] += size
        if not placed:
            raise InvalidVolume(f"no volume planned for {binding.canonical()}")
    for disk in old_disks:
        left = host.left.get(disk.device)
        if left is not None:
            host.left[disk.device] = add(left, disk.quota)


class _Placement:
    def __init__(self, host: Host, old: list[tuple[Binding, dict[str, int]]]) -> None:
        self.host = host
        self.old = old
        self.volumes: VolumePlan = {}
        self.disks: dict[str, Quota] = {}
        self.queue: list[Binding] = []

    def old_path(self, binding: Binding) -> str | None:
        """The path of the old entry with this binding's (source, destination, flags); an
        entry lists one path, and upstream reads its first."""
        for was, placed in self.old:
            if was.key == binding.key:
                return min(placed)
        return None

    def place(self, merged: Sequence[Binding]) -> Plan:
        classes = classify(merged)
        failure = "not enough IOPS quota for mounts"
        for binding in (*classes.mounts, *classes.bare_mounts):
            self._charge(binding.source, binding.quota, failure, listed=True)
        self._keep(classes.normal)
        if classes.mono:
            self._keep_group(classes.mono)
        self._keep(classes.unlimited)
        if self.queue:
            found = schedule(self.host, self.queue, 1)
            if found.count == 0:
                queued = ", ".join(b.canonical() for b in self.queue)
                raise NotEnoughResource(f"no plan for {queued}")
            first = found.plans(1)[0]
            self.volumes.update(first.volumes)
            for device, quota in first.disks.items():
                self.disks[device] = add(self.disks.get(device, NO_QUOTA), quota)
        return Plan(volumes=self.volumes, disks=dict(sorted(self.disks.items())))

    def _charge(self, path: str, quota: Quota, failure: str, *, listed: bool = False) -> None:
        """``quota`` taken from the disk of ``path``; a zero quota is listed (as upstream lists
        mounts' and monopoly groups' entries) only when ``listed``."""
        if not any(quota) and not listed:
            return
        device = self.host.disk_of(path)
        if any(quota):
            if device is None or not fits(quota, self.host.left[device]):
                raise NotEnoughResource(f"{failure}: {path}")
            self.host.left[device] = subtract(self.host.left[device], quota)
        list_charge(self.disks, device, quota)

    def _keep(self, bindings: Sequence[Binding]) -> None:
        """Normal and unlimited bindings: a match stays on its old path, at its new size."""
        free = self.host.free
        for binding in bindings:
            path = self.old_path(binding)
            if path is None:
                self.queue.append(binding)
                continue
            if binding.size > free[path]:
                raise NotEnoughResource(
                    f"no space to expand: {path} has {free[path]} bytes left, "
                    f"{binding.canonical()} needs {binding.size}"
                )
            free[path] -= binding.size
            self.volumes[binding.canonical()] = {path: binding.size}
            self._charge(path, binding.quota, "no IOPS quota to expand")

    def _keep_group(self, mono: Sequence[Binding]) -> None:
        """A monopoly group with any old member is split again over that member's path; with
        none, it is placed anew (never onto a volume it frees here: that one is "used")."""
        matched = [b for b in mono if self.old_path(b) is not None]
        if not matched:
            self.queue.extend(mono)
            return
        wanted = sum(b.size for b in mono)
        held = sum(sum(placed.values()) for was, placed in self.old if was.monopoly)
        path = self.old_path(matched[0])
        assert path is not None
        free = self.host.free[path]
        if held < wanted or free < wanted:
            raise NotEnoughResource(
                f"no space to expand: the group on {path} holds {held} bytes, needs {wanted}"
            )
        quota = NO_QUOTA
        for binding in mono:
            quota = add(quota, binding.quota)
        if any(quota):
            device = self.host.disk_of(path)
            if not fits(quota, NO_QUOTA if device is None else self.host.left[device]):
                raise NotEnoughResource(f"no IOPS quota to expand: {path}")
        for binding, share in zip(mono, shares(mono, free), strict=True):
            self.volumes[binding.canonical()] = {path: share}
        self.host.free[path] = 0
        self._charge(path, quota, "no IOPS quota to expand", listed=True)
