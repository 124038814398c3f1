"""A node's state is the fold of its events: ``state = reduce(apply, events, None)``."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ledger import cards
from ledger.cards import Cards
from ledger.events import (
    Adopted,
    CapacityChanged,
    CapacitySet,
    Change,
    Event,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)


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


def fold(events: Iterable[Event], state: NodeState | None = None) -> NodeState | None:
    for event in events:
        state = apply(state, event.change)
    return state
