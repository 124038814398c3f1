"""How storage states and changes read to people and to auditors' tools: the table cells and
JSON the generic auditor commands (history, show, nodes) print for this kind."""

from __future__ import annotations

from typing import Any

from resource_extend.projections import changes
from resource_extend.projections.parts import Measure, human
from resource_extend.projections.storage.events import KINDS as KINDS  # every change kind
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.state import NodeState
from resource_extend.projections.storage.wire.resources import NodeResource

EMPTY = NodeState(capacity=NodeResource(), usage=NodeResource())
"""What a node without a readable record shows: nothing."""

STATE_HEADERS: tuple[str, ...] = ("VOLUMES (USED/CAPACITY)", "STORAGE", "DISKS")
"""The columns of a state in a listing (``nodes``; ``history`` adds "AFTER")."""

DETAIL_HEADERS: tuple[str, ...] = (*STATE_HEADERS, "FREE STORAGE")
"""The columns of one state shown alone (``show``)."""


def _volumes(state: NodeState) -> str:
    used = state.usage.volumes or {}
    capacity = state.capacity.volumes or {}
    paths = sorted(set(capacity) | set(used))
    return (
        ", ".join(f"{p} {human(used.get(p, 0))}/{human(capacity.get(p, 0))}" for p in paths)
        or "none"
    )


def _quota(disk: Disk, *, signed: bool = False) -> str:
    r, w, rb, wb = disk.quota
    iops = f"{_sign(r, signed)}{r}/{_sign(w, signed)}{w} IOPS"
    return f"{iops} {_sign(rb, signed)}{human(rb)}/{_sign(wb, signed)}{human(wb)} B/s"


def _sign(n: int, signed: bool) -> str:
    """The ``+`` a delta's non-negative figure shows (a negative one has its ``-``)."""
    return "+" if signed and n >= 0 else ""


def _disks(state: NodeState) -> str:
    used = {d.device: d for d in state.usage.disks or ()}
    shown = []
    for disk in sorted(state.capacity.disks or (), key=lambda d: d.device):
        taken = used.get(disk.device)
        shown.append(
            f"{disk.device} {_quota(taken) if taken else '0/0 IOPS 0/0 B/s'} of {_quota(disk)}"
        )
    return ", ".join(shown) or "none"


def state_cells(state: NodeState | None) -> tuple[str, ...]:
    if state is None:
        return ("-",) * len(STATE_HEADERS)
    storage = f"{human(state.usage.storage)}/{human(state.capacity.storage)}"
    return _volumes(state), storage, _disks(state)


def detail_cells(state: NodeState) -> tuple[str, ...]:
    return (*state_cells(state), human(state.capacity.storage - state.usage.storage))


def state_json(state: NodeState | None) -> dict[str, Any]:
    """``{"capacity": R, "usage": R}``, the upstream record's shape (no node: empty)."""
    state = state or EMPTY
    return {"capacity": state.capacity, "usage": state.usage}


def describe(resource: NodeResource, *, signed: bool = False) -> str:
    """A resource (or a delta) in a few words: ``/data0 +100G, storage +100G, /dev/vda +100/+0
    IOPS +0/+0 B/s``."""
    parts = [
        f"{p} {_sign(n, signed)}{human(n)}" for p, n in sorted((resource.volumes or {}).items())
    ]
    parts.append(f"storage {_sign(resource.storage, signed)}{human(resource.storage)}")
    parts += [f"{d.device} {_quota(d, signed=signed)}" for d in resource.disks or ()]
    return ", ".join(parts)


def _signed(delta: NodeResource) -> str:
    return describe(delta, signed=True)


def summary(change: Any) -> str | None:
    """What a change of a storage stream did, in a few words (None: the ledger's own)."""
    return changes.summary(change, describe, _signed)


_QUOTAS = (("read IOPS", "IOPS"), ("write IOPS", "IOPS"), ("read B/s", "B/s"), ("write B/s", "B/s"))
"""A disk's four quotas, in ``Disk.quota``'s order, as its charts are titled and counted."""


def measures(state: NodeState | None) -> list[Measure]:
    """A chart per volume, one of the storage total, and four per disk (read and write IOPS,
    read and write bytes a second)."""
    if state is None:
        return []
    capacity, usage = state.capacity, state.usage
    cap_volumes, used_volumes = capacity.volumes or {}, usage.volumes or {}
    found = [
        Measure(f"volume {path}", "B", cap_volumes.get(path, 0), used_volumes.get(path, 0))
        for path in sorted(cap_volumes.keys() | used_volumes.keys())
    ]
    found.append(Measure("storage", "B", capacity.storage, usage.storage))
    cap_disks = {disk.device: disk.quota for disk in capacity.disks or ()}
    used_disks = {disk.device: disk.quota for disk in usage.disks or ()}
    for device in sorted(cap_disks.keys() | used_disks.keys()):
        has, uses = cap_disks.get(device, (0, 0, 0, 0)), used_disks.get(device, (0, 0, 0, 0))
        found += [
            Measure(f"{device} {quota}", unit, has[index], uses[index], headline=False)
            for index, (quota, unit) in enumerate(_QUOTAS)
        ]
    return found
