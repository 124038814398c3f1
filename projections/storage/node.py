"""A storage node's state is the fold of its events: ``state = reduce(apply, events, None)``;
and :data:`STORAGE`, everything the ledger needs to know of the kind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from resource_extend.ledger import audit
from resource_extend.ledger.audit import BrokenStream
from resource_extend.ledger.errors import InvalidRequest
from resource_extend.ledger.events import AnyEvent, EventCodec
from resource_extend.ledger.kinds import Head, Kind, field_differences
from resource_extend.projections.changes import workloads_contradiction
from resource_extend.projections.storage import arithmetic, views
from resource_extend.projections.storage.events import (
    EVENTS,
    Adopted,
    CapacityChanged,
    CapacitySet,
    Change,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
    encode_record,
)
from resource_extend.projections.storage.resources import NodeResource
from resource_extend.projections.storage.state import NodeState, validated, zero_usage
from resource_extend.projections.storage.stored import read_stored

__all__ = ["STORAGE", "BrokenStream", "NodeState", "apply", "apply_own", "fold"]


def _follow(capacity: NodeResource, usage: NodeResource) -> NodeState:
    """The state a change leads to, normalised as every write is; a change that breaks the
    rules could not have been appended, so it breaks the stream."""
    try:
        return validated(capacity, usage)
    except InvalidRequest as exc:
        raise BrokenStream(exc.reason) from None


def apply_own(state: NodeState | None, change: Any) -> NodeState | None:
    """The state after one of storage's own changes. ``None`` is "no such node"."""
    if isinstance(change, NodeAdded):
        return _follow(change.capacity, zero_usage(change.capacity))
    if isinstance(change, Adopted):
        return NodeState(capacity=change.capacity, usage=change.usage)
    if isinstance(change, NodeInfoSet):
        return _follow(change.capacity, change.usage)
    if isinstance(change, NodeRemoved):
        return None
    if state is None:
        raise BrokenStream(f"{type(change).__name__} on a node that does not exist")
    if isinstance(change, CapacitySet):
        return _follow(change.capacity, state.usage)
    if isinstance(change, CapacityChanged):
        grown = arithmetic.without_empty_volumes(arithmetic.add(state.capacity, change.delta))
        return _follow(grown, state.usage)
    if isinstance(change, UsageChanged):
        return _follow(state.capacity, arithmetic.add(state.usage, change.delta))
    if isinstance(change, (UsageSet, UsageRebuilt)):
        return _follow(state.capacity, change.usage)
    raise BrokenStream(f"unknown change {change!r}")


class StorageKind(Kind[NodeState]):
    """Volumes, disk quotas and storage space: the ``resource-storage`` plugin's records and
    events."""

    name = "storage"
    program = "resource-storage"
    events: EventCodec = EVENTS

    def apply(self, state: NodeState | None, change: Any) -> NodeState | None:
        return apply_own(state, change)

    def read_head(self, raw: bytes) -> Head[NodeState]:
        capacity, usage, seq = read_stored(raw)
        return Head(state=NodeState(capacity=capacity, usage=usage), seq=seq)

    def write_head(self, state: NodeState, seq: int) -> bytes:
        return encode_record(state.capacity, state.usage, seq)

    def invalid(self, state: NodeState) -> str | None:
        # Storage's figures are checked as each change applies (the write guard); a fold that
        # breaks them raises BrokenStream there.
        return None

    def contradiction(self, change: Any) -> str | None:
        def negate(summed: NodeResource) -> NodeResource:
            return arithmetic.subtract(NodeResource(), summed)

        return workloads_contradiction(change, arithmetic.workloads_usage, negate, views.describe)

    def adopted(self, state: NodeState, record: bytes) -> Change:
        found = record.decode(errors="replace")
        return Adopted(capacity=state.capacity, usage=state.usage, record=found)

    def describe(self, state: NodeState) -> str:
        return f"capacity {views.describe(state.capacity)}; usage {views.describe(state.usage)}"

    def differences(self, head: NodeState, stream: NodeState) -> list[str]:
        return field_differences(
            (("capacity", head.capacity, stream.capacity), ("usage", head.usage, stream.usage)),
            views.describe,
        )


STORAGE = StorageKind()


def apply(state: NodeState | None, change: Any) -> NodeState | None:
    """The state after any change of a storage stream, the ledger's checkpoints included."""
    return audit.apply(STORAGE, state, change)


def fold(events: Iterable[AnyEvent], state: NodeState | None = None) -> NodeState | None:
    return audit.fold(STORAGE, events, state)
