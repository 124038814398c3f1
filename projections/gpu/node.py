"""A GPU node's state is the fold of its events: ``state = reduce(apply, events, None)``; and
:data:`GPU`, everything the ledger needs to know of the kind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from resource_extend.ledger import audit
from resource_extend.ledger.audit import BrokenStream
from resource_extend.ledger.events import AnyEvent, Change, EventCodec
from resource_extend.ledger.kinds import Head as HeadRecord
from resource_extend.ledger.kinds import Kind, field_differences
from resource_extend.projections.changes import workloads_contradiction
from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.events import (
    EVENTS,
    Adopted,
    CapacityChanged,
    CapacitySet,
    Head,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
    encode,
    read_stored_head,
)
from resource_extend.projections.gpu.resources import Resource
from resource_extend.projections.gpu.state import NodeState

__all__ = ["GPU", "BrokenStream", "NodeState", "apply", "fold"]


def apply_own(state: NodeState | None, change: Any) -> NodeState | None:
    """The state after one of GPU's own changes. ``None`` is "no such node"."""
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


class GpuKind(Kind[NodeState]):
    """GPUs by product model: the ``resource-gpu`` plugin's records and events."""

    name = "gpu"
    program = "resource-gpu"
    events: EventCodec = EVENTS

    def apply(self, state: NodeState | None, change: Any) -> NodeState | None:
        return apply_own(state, change)

    def read_head(self, raw: bytes) -> HeadRecord[NodeState]:
        capacity, usage, seq = read_stored_head(raw)
        return HeadRecord(state=NodeState(capacity=capacity, usage=usage), seq=seq)

    def write_head(self, state: NodeState, seq: int) -> bytes:
        capacity, usage = Resource.of(state.capacity), Resource.of(state.usage)
        return encode(Head(capacity=capacity, usage=usage, seq=seq))

    def invalid(self, state: NodeState) -> str | None:
        for name, counts in (("capacity", state.capacity), ("usage", state.usage)):
            negative = {product: n for product, n in counts.items() if n < 0}
            if negative:
                return f"{name} goes negative: {cards.describe(negative)}"
        return None

    def contradiction(self, change: Any) -> str | None:
        def add_up(workloads: list[Cards]) -> Cards:
            return cards.normalised(cards.sum_all(workloads))

        def negate(summed: Cards) -> Cards:
            return cards.normalised(cards.negate(summed))

        return workloads_contradiction(change, add_up, negate, cards.describe)

    def adopted(self, state: NodeState, record: bytes) -> Change:
        found = record.decode(errors="replace")
        return Adopted(capacity=state.capacity, usage=state.usage, record=found)

    def describe(self, state: NodeState) -> str:
        return f"capacity {cards.describe(state.capacity)}, usage {cards.describe(state.usage)}"

    def differences(self, head: NodeState, stream: NodeState) -> list[str]:
        return field_differences(
            (("capacity", head.capacity, stream.capacity), ("usage", head.usage, stream.usage)),
            cards.describe,
        )


GPU = GpuKind()


def apply(state: NodeState | None, change: Any) -> NodeState | None:
    """The state after any change of a GPU stream, the ledger's checkpoints included."""
    return audit.apply(GPU, state, change)


def fold(events: Iterable[AnyEvent], state: NodeState | None = None) -> NodeState | None:
    return audit.fold(GPU, events, state)
