"""From a plan to what core stores and what the engine gets: the limit plan, the
limit disks, the engine's volume strings and IOPS options.

Plans are looked up by binding, (source, destination, flags), for the limit plan as upstream
does and for the engine too (upstream looked the engine's bindings up by destination: two
bindings sharing one were both mounted on one of their volumes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from resource_extend.projections.storage.grammar.bindings import Binding, parse_binding
from resource_extend.projections.storage.grammar.disks import NO_QUOTA, Disk, Mounts, Quota, add
from resource_extend.projections.storage.wire.resources import VolumePlan


def first(placed: Mapping[str, int]) -> tuple[str, int]:
    """A plan entry's path and bytes: entries list one path (upstream reads "the first")."""
    path = min(placed)
    return path, placed[path]


def applied(limit: Sequence[Binding], plan: VolumePlan) -> list[Binding]:
    """The limit bindings on their planned paths, each at least its planned size (a monopoly
    share is the whole volume); bindings the plan does not name pass unchanged."""
    by_key = _placed_by_key(plan)
    result = []
    for binding in limit:
        found = by_key.get(binding.key)
        if found is None:
            result.append(binding)
        else:
            path, size = found
            result.append(binding.placed(path, max(binding.size, size)))
    return result


def _placed_by_key(plan: VolumePlan) -> dict[tuple[str, str, str], tuple[str, int]]:
    """Each planned binding's (source, destination, flags) with its path and bytes."""
    by_key: dict[tuple[str, str, str], tuple[str, int]] = {}
    for key, placed in sorted(plan.items()):
        if placed:
            by_key.setdefault(parse_binding(key).key, first(placed))
    return by_key


def plan_limit(
    request: Sequence[Binding], limit: Sequence[Binding], plan: VolumePlan
) -> VolumePlan:
    """Each scheduled limit binding's planned path with its planned bytes + (limit - request):
    the pairs are matched by index (both lists sorted by canonical string)."""
    by_key = _placed_by_key(plan)
    result: VolumePlan = {}
    for asked, capped in zip(request, limit, strict=True):
        found = by_key.get(capped.key) if capped.scheduled else None
        if found is not None:
            path, size = found
            result[capped.canonical()] = {path: size + capped.size - asked.size}
    return result


def disks_limit(
    limit: Sequence[Binding], plan_limit: VolumePlan, disks: Sequence[Disk]
) -> list[Disk]:
    """The limit bindings' quota per device: mounts charge their source's disk, scheduled
    bindings their planned path's. A path no disk covers is skipped (upstream crashes there)."""
    mounts = Mounts(disks)
    charged: dict[str, Quota] = {}

    def charge(path: str, quota: Quota) -> None:
        device = mounts.disk_for(path)
        if device is not None:
            charged[device] = add(charged.get(device, NO_QUOTA), quota)

    for binding in limit:
        if binding.has_io and not binding.scheduled:
            charge(binding.source, binding.quota)
    for key, placed in sorted(plan_limit.items()):
        binding = parse_binding(key)
        if binding.has_io and placed:
            charge(first(placed)[0], binding.quota)
    return disk_list(charged, disks)


def disk_list(charged: Mapping[str, Quota], disks: Sequence[Disk]) -> list[Disk]:
    """``{device: quota}`` as the record's disk entries, sorted by device, each with the
    mounts of the node's disk (upstream copies them in)."""
    mounts_of = {disk.device: disk.mounts for disk in disks}
    return [
        Disk(device=device, mounts=mounts_of.get(device)).with_quota(quota)
        for device, quota in sorted(charged.items())
    ]


def iops_options(disks: Iterable[Disk]) -> dict[str, str]:
    """``{device: "rIOPS:wIOPS:rBPS:wBPS"}``: docker's blkio throttles."""
    return {disk.device: ":".join(map(str, disk.quota)) for disk in disks}


def engine_volumes(bindings: Sequence[Binding]) -> list[str] | None:
    """The engine's volume strings; ``null`` when there are none, as upstream writes it."""
    return [binding.engine() for binding in bindings] or None
