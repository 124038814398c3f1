"""A node's state is the fold of its events: ``state = reduce(apply, events, None)``."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from resource_extend.ledger.events import (
    Adopted,
    CapacityChanged,
    CapacitySet,
    Change,
    Checkpoint,
    Event,
    Head,
    HeadRepaired,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from resource_extend.ledger.events import Snapshot as StateSnapshot
from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.resources import Resource


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    """Capacity and usage of one node; both maps are normalised (no zero counts)."""

    capacity: Cards = msgspec.field(default_factory=dict)
    usage: Cards = msgspec.field(default_factory=dict)

    @property
    def available(self) -> Cards:
        """Capacity minus usage; negative where an operator shrank a node below its usage."""
        return cards.subtract(self.capacity, self.usage)


class BrokenStream(ValueError):
    """An event that cannot follow the state before it (a corrupt or foreign stream)."""


def apply(state: NodeState | None, change: Change) -> NodeState | None:
    """The state after one change. ``None`` is "no such node"."""
    if isinstance(change, NodeAdded):
        return NodeState(capacity=change.capacity)
    if isinstance(change, (Adopted, NodeInfoSet)):
        return NodeState(capacity=change.capacity, usage=change.usage)
    if isinstance(change, NodeRemoved):
        return None
    if isinstance(change, (Checkpoint, HeadRepaired)):
        return state_of(change.state)
    if state is None:
        raise BrokenStream(f"{type(change).__name__} on a node that does not exist")
    if isinstance(change, CapacitySet):
        return NodeState(capacity=change.capacity, usage=state.usage)
    if isinstance(change, CapacityChanged):
        return NodeState(capacity=cards.add(state.capacity, change.delta), usage=state.usage)
    if isinstance(change, UsageChanged):
        return NodeState(capacity=state.capacity, usage=cards.add(state.usage, change.delta))
    if isinstance(change, (UsageSet, UsageRebuilt)):
        return NodeState(capacity=state.capacity, usage=change.usage)
    raise BrokenStream(f"unknown change {change!r}")


def state_of_head(head: Head) -> NodeState:
    """The state a head records. An upstream head may hold ``null`` for a map or a resource."""
    return NodeState(capacity=_cards_of(head.capacity), usage=_cards_of(head.usage))


def _cards_of(resource: Resource | None) -> Cards:
    return cards.normalised(resource.prod_count_map or {}) if resource else {}


def state_of(snapshot: StateSnapshot | None) -> NodeState | None:
    if snapshot is None:
        return None
    return NodeState(capacity=snapshot.capacity, usage=snapshot.usage)


def snapshot_of(state: NodeState | None) -> StateSnapshot | None:
    if state is None:
        return None
    return StateSnapshot(capacity=state.capacity, usage=state.usage)


def fold(events: Iterable[Event], state: NodeState | None = None) -> NodeState | None:
    for event in events:
        state = apply(state, event.change)
    return state
