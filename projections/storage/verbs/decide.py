"""Decisions: from a node's current state and a validated request, the change to append.

The new state comes from ``updates`` (and ``diffs`` for a fix), which check every rule of a write
(upstream's write-time checks, run inside each append's compare-and-swap); here it becomes the event
that leads there. Each function is pure and is re-run on the fresh state when a concurrent write
wins the compare-and-swap, so the rules are checked against the state the write will actually
follow. It raises a :class:`~ledger.model.errors.PluginError` when the request cannot be applied
(nothing is written) and returns ``None`` when it would change nothing (nothing is appended).

A delta is recorded as a delta only where replaying it gives exactly the state decided;
otherwise (rm-disks, mounts replaced...) the whole new value is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from resource_extend.projections.storage import arithmetic
from resource_extend.projections.storage.events import (
    CapacityChanged,
    CapacitySet,
    Change,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from resource_extend.projections.storage.node import STORAGE
from resource_extend.projections.storage.state import NodeState
from resource_extend.projections.storage.verbs import diffs, updates
from resource_extend.projections.storage.verbs.updates import Given
from resource_extend.projections.storage.wire.node_requests import AskedResource
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource

__all__ = [
    "add_node",
    "rebuild_usage",
    "remove_node",
    "set_capacity",
    "set_info",
    "set_usage",
]


def add_node(
    node: str,
    state: NodeState | None,
    given: Given | None,
    engine_storage: bytes | None,
    *,
    reported: bool = True,
    storage_total: int = 0,
) -> Change:
    added = updates.add_node(
        node, state, given, engine_storage, reported=reported, storage_total=storage_total
    )
    return NodeAdded(capacity=added.capacity)


def remove_node(state: NodeState | None) -> Change | None:
    return None if state is None else NodeRemoved()


def _signed(given: Given, incr: bool) -> NodeResource:
    resource = given.as_resource() if isinstance(given, AskedResource) else given
    return resource if incr else arithmetic.subtract(NodeResource(), resource)


def _as_delta(state: NodeState, after: NodeState, delta: Change, whole: Change) -> Change | None:
    """``delta`` if replaying it leads to ``after``, else ``whole``; None if nothing changes."""
    if after == state:
        return None
    return delta if STORAGE.apply(state, delta) == after else whole


def set_capacity(
    node: str, state: NodeState | None, given: Given | None, *, delta: bool, incr: bool
) -> Change | None:
    after = updates.set_capacity(node, state, given, delta=delta, incr=incr)
    before = STORAGE.as_read(state)
    whole = CapacitySet(capacity=after.capacity)
    if not delta or given is None:
        return None if after == before else whole
    return _as_delta(before, after, CapacityChanged(delta=_signed(given, incr)), whole)


def set_usage(
    node: str,
    state: NodeState | None,
    given: Given | None,
    workloads: Sequence[WorkloadResource | None] | None,
    *,
    delta: bool,
    incr: bool,
) -> Change | None:
    after = updates.set_usage(node, state, given, workloads, delta=delta, incr=incr)
    before = STORAGE.as_read(state)
    whole = UsageSet(usage=after.usage)
    if not delta:
        return None if after == before else whole
    change: UsageChanged[NodeResource, WorkloadResource]
    if given is not None:
        change = UsageChanged(delta=_signed(given, incr))
    else:
        named = [w for w in workloads or () if w is not None]
        summed = _signed(arithmetic.workloads_usage(named), incr)
        change = UsageChanged(delta=summed, workloads=named or None)
    return _as_delta(before, after, change, whole)


def set_info(
    state: NodeState | None, capacity: NodeResource | None, usage: NodeResource | None
) -> Change | None:
    if state is None and capacity is None and usage is None:
        # Core's RemoveNode rollback hands back what get-node-resource-info read: null for a
        # node this plugin never had, which has nothing to restore.
        return None
    after = updates.set_info(capacity, usage)
    if state is None and not STORAGE.differences(after, STORAGE.empty()):
        return None  # a node with no record (never seen, or removed) left empty: as it reads
    return None if after == state else NodeInfoSet(capacity=after.capacity, usage=after.usage)


def rebuild_usage(
    node: str, state: NodeState | None, workloads: Sequence[WorkloadResource | None]
) -> Change | None:
    found, after = diffs.fixed(node, state, workloads)
    if after is None:
        return None
    return UsageRebuilt(usage=after.usage, diffs=found)
