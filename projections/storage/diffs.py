"""How a node's stored usage disagrees with what its workloads hold (get-node-resource-info,
fix-node-resource), in upstream's words and a fixed order: storage, then volume paths sorted,
then disks by device."""

from __future__ import annotations

from collections.abc import Sequence

from resource_extend.projections.storage.arithmetic import workloads_usage
from resource_extend.projections.storage.disks import NO_QUOTA
from resource_extend.projections.storage.resources import NodeResource, WorkloadResource
from resource_extend.projections.storage.state import NodeState, existing, validated


def usage_diffs(usage: NodeResource, held: NodeResource) -> list[str]:
    """One line per disagreement between ``usage`` and ``held`` (the workloads' sum).

    Paths of usage come first, then paths only the workloads hold (when they hold a non-zero
    size there); a disk only the workloads hold is not reported (as upstream), though a fix
    writes it. The workloads' figure for a disk is shown with the stored disk's mounts.
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
    held_disks = {disk.device: disk for disk in held.disks or ()}
    for disk in sorted(usage.disks or (), key=lambda disk: disk.device):
        held_disk = held_disks.get(disk.device)
        stored = disk.text()
        should = disk.with_quota(NO_QUOTA if held_disk is None else held_disk.quota).text()
        if stored != should:
            diffs.append(
                f"node.Disks[{disk.device}] != sum(workload.Disks[{disk.device}]): "
                f"{stored} != {should}"
            )
    return diffs


def node_diffs(
    node: str, state: NodeState | None, workloads: Sequence[WorkloadResource | None]
) -> list[str]:
    """get-node-resource-info's diffs; an unknown node is an error (as upstream)."""
    return usage_diffs(existing(node, state).usage, workloads_usage(workloads))


def fixed(
    node: str, state: NodeState | None, workloads: Sequence[WorkloadResource | None]
) -> tuple[list[str], NodeState | None]:
    """fix-node-resource: the diffs, and the state with usage rebuilt from the workloads when there
    are any (``None``: nothing to write). A rebuilt usage that breaks a rule raises: the fix fails
    rather than reporting an unsaved usage (upstream reported it: docs/differences.md)."""
    current = existing(node, state)
    held = workloads_usage(workloads)
    diffs = usage_diffs(current.usage, held)
    if not diffs:
        return diffs, None
    return diffs, validated(current.capacity, held)
