"""The changes every kind's node verbs make, written once: both programs answer the same verbs,
so their streams name the same kinds of change. ``R`` is the kind's resource value (GPU: a card
map; storage: volumes, disks and storage) and ``W`` a workload's resource as core hands it back.

A change records what happened, never a copy of the whole state, except where the change *is*
a whole state (adoption, absolute sets, rebuilds). A kind's event union names them with its own
types (``NodeAdded[Cards]``); its fold matches them by class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from resource_extend.ledger.model.events import Change

R = TypeVar("R")
W = TypeVar("W")


class NodeAdded(Change, Generic[R], tag="node_added"):
    capacity: R


class Adopted(Change, Generic[R], tag="adopted"):
    """A head written by the upstream Go plugin, taken over as found."""

    capacity: R
    usage: R
    record: str | None = None
    """The record exactly as found (its JSON: every field, zero counts, null or empty as they
    were), from v3."""


class CapacitySet(Change, Generic[R], tag="capacity_set"):
    """set-node-resource-capacity with delta=false: the capacity replaced."""

    capacity: R


class CapacityChanged(Change, Generic[R], tag="capacity_changed"):
    """Capacity added (positive) or taken away (negative)."""

    delta: R


class UsageChanged(Change, Generic[R, W], tag="usage_changed"):
    """Resources taken (positive) or given back (negative), with the workloads that caused it
    when core named them."""

    delta: R
    workloads: list[W] | None = None


class UsageSet(Change, Generic[R], tag="usage_set"):
    usage: R


class NodeInfoSet(Change, Generic[R], tag="node_info_set"):
    capacity: R
    usage: R


class UsageRebuilt(Change, Generic[R], tag="usage_rebuilt"):
    """fix-node-resource: usage set to the workloads' sums, with the differences it found."""

    usage: R
    diffs: list[str]


class NodeRemoved(Change, tag="node_removed"):
    pass


def workloads_contradiction(
    change: Any, add_up: Callable[[Any], R], negate: Callable[[R], R], describe: Callable[[R], str]
) -> str | None:
    """``Kind.contradiction`` for a usage change that names its workloads: its delta must be
    what they add up to (``add_up``), taken or given back (``negate``)."""
    if not isinstance(change, UsageChanged) or change.workloads is None:
        return None
    summed = add_up(change.workloads)
    if change.delta in (summed, negate(summed)):
        return None
    return (
        f"its delta ({describe(change.delta)}) is not what its workloads add up to "
        f"({describe(summed)})"
    )


def summary(
    change: Any, describe: Callable[[Any], str], signed: Callable[[Any], str]
) -> str | None:
    """What a node change did, in a few words, given how the kind writes a value (``describe``)
    and a delta (``signed``); None for anything else (the ledger's own changes)."""
    if isinstance(change, NodeAdded | CapacitySet):
        return f"capacity = {describe(change.capacity)}"
    if isinstance(change, Adopted | NodeInfoSet):
        return f"capacity = {describe(change.capacity)}; usage = {describe(change.usage)}"
    if isinstance(change, CapacityChanged):
        return f"capacity {signed(change.delta)}"
    if isinstance(change, UsageChanged):
        count = len(change.workloads or [])
        workloads = f" ({count} workload{'s' * (count != 1)})" if count else ""
        return f"usage {signed(change.delta)}{workloads}"
    if isinstance(change, UsageSet):
        return f"usage = {describe(change.usage)}"
    if isinstance(change, UsageRebuilt):
        return f"usage = {describe(change.usage)}; diffs: {'; '.join(change.diffs)}"
    if isinstance(change, NodeRemoved):
        return "node removed"
    return None
