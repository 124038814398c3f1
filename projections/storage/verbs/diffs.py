"""How a node's stored usage disagrees with what its workloads hold (get-node-resource-info,
fix-node-resource), in upstream's words and a fixed order: storage, then volume paths sorted,
then disks by device."""

from __future__ import annotations

from collections.abc import Sequence

from resource_extend.projections.storage.arithmetic import workloads_usage
from resource_extend.projections.storage.grammar.disks import NO_QUOTA, Disk
from resource_extend.projections.storage.state import NodeState, existing, validated
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource


def usage_diffs(
    usage: NodeResource, held: NodeResource, capacity_disks: Sequence[Disk] = ()
) -> list[str]:
    """One line per disagreement between ``usage`` and ``held`` (the workloads' sum).

    Paths of usage come first, then paths only the workloads hold (when they hold a non-zero
    size there); so too disks: those of usage, then those only the workloads hold quota on (a
    disk capacity gained by a delta has no usage entry; upstream left these out, so a fix wrote
    nothing and the next deploy could take the disk past its capacity). The workloads' figure
    for a disk is shown with the node's mounts for it (``capacity_disks``).
    """
    diffs: list[str] = []
    if usage.storage != held.storage:
        diffs.append(f"node.Storage != sum(workload.Storage): {usage.storage} != {held.storage}")
    used, summed = usage.volumes or {}, held.volumes or {}
    unused = sorted(path for path, size in summed.items() if path not in used and size != 0)
    for path in [*sorted(used), *unused]:
        if used.get(path, 0) != summed.get(path, 0):
            diffs.append(
                f"node.Volumes[{path}] != sum(workload.Volumes[{path}]): "
                f"{used.get(path, 0)} != {summed.get(path, 0)}"
            )
    stored_disks = {disk.device: disk for disk in usage.disks or ()}
    held_disks = {disk.device: disk for disk in held.disks or ()}
    mounts = {disk.device: disk.mounts for disk in capacity_disks}
    missing = sorted(
        device
        for device, disk in held_disks.items()
        if device not in stored_disks and disk.quota != NO_QUOTA
    )
    for device in [*sorted(stored_disks), *missing]:
        stored_disk = stored_disks.get(device) or Disk(device=device, mounts=mounts.get(device))
        held_disk = held_disks.get(device)
        stored = stored_disk.text()
        should = stored_disk.with_quota(NO_QUOTA if held_disk is None else held_disk.quota).text()
        if stored != should:
            diffs.append(
                f"node.Disks[{device}] != sum(workload.Disks[{device}]): {stored} != {should}"
            )
    return diffs


def node_diffs(
    node: str, state: NodeState | None, workloads: Sequence[WorkloadResource | None]
) -> list[str]:
    """get-node-resource-info's diffs; an unknown node is an error (as upstream)."""
    current = existing(node, state)
    return usage_diffs(current.usage, workloads_usage(workloads), current.capacity.disks or ())


def fixed(
    node: str, state: NodeState | None, workloads: Sequence[WorkloadResource | None]
) -> tuple[list[str], NodeState | None]:
    """fix-node-resource: the diffs, and the state with usage rebuilt from the workloads when there
    are any (``None``: nothing to write). A rebuilt usage that breaks a rule raises: the fix fails
    rather than reporting an unsaved usage (upstream reported it: docs/differences.md)."""
    current = existing(node, state)
    held = workloads_usage(workloads)
    diffs = usage_diffs(current.usage, held, current.capacity.disks or ())
    if not diffs:
        return diffs, None
    return diffs, validated(current.capacity, held)
