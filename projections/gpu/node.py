"""A GPU node's state is the fold of its events (``projections.node``, over card maps); and
:data:`GPU`, everything the ledger needs to know of the kind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from resource_extend.ledger.model import audit
from resource_extend.ledger.model.audit import BrokenStream
from resource_extend.ledger.model.contract import Head
from resource_extend.ledger.model.events import AnyEvent, EventCodec
from resource_extend.ledger.model.kinds import program_of
from resource_extend.projections.changes import workloads_contradiction
from resource_extend.projections.gojson import go_escaped
from resource_extend.projections.gpu import KIND, cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.events import EVENTS, GpuRecord, encode, read_stored_head
from resource_extend.projections.gpu.resources import Resource
from resource_extend.projections.gpu.state import NodeState
from resource_extend.projections.node import NodeKind

__all__ = ["GPU", "BrokenStream", "NodeState", "apply", "fold"]


class GpuKind(NodeKind[NodeState, Cards]):
    """GPUs by product model: the ``resource-gpu`` plugin's records and events."""

    name = KIND
    program = program_of(KIND)
    events: EventCodec = EVENTS

    def state(self, capacity: Cards, usage: Cards) -> NodeState:
        return NodeState(capacity=capacity, usage=usage)

    def added(self, capacity: Cards) -> NodeState:
        return NodeState(capacity=capacity)

    def empty(self) -> NodeState:
        """No cards, none used."""
        return NodeState()

    def add(self, value: Cards, delta: Cards) -> Cards:
        return cards.add(value, delta)

    def describe_value(self, value: Cards) -> str:
        return cards.describe(value)

    def read_head(self, raw: bytes) -> Head[NodeState]:
        capacity, usage, seq = read_stored_head(raw)
        return Head(state=NodeState(capacity=capacity, usage=usage), seq=seq)

    def write_head(self, state: NodeState, seq: int) -> bytes:
        """Upstream's record, in Go's bytes (``projections.gojson``), plus seq."""
        capacity, usage = Resource.of(state.capacity), Resource.of(state.usage)
        return go_escaped(encode(GpuRecord(capacity=capacity, usage=usage, seq=seq)))

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


GPU = GpuKind()


def apply(state: NodeState | None, change: Any) -> NodeState | None:
    """The state after any change of a GPU stream, the ledger's checkpoints included."""
    return audit.apply(GPU, state, change)


def fold(events: Iterable[AnyEvent], state: NodeState | None = None) -> NodeState | None:
    return audit.fold(GPU, events, state)
