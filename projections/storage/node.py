"""A storage node's state is the fold of its events (``projections.node``, over volumes, disks
and storage, each state checked as every write checks it); and :data:`STORAGE`, everything the
ledger needs to know of the kind."""

from __future__ import annotations

from typing import Any

from resource_extend.ledger.model.audit import BrokenStream
from resource_extend.ledger.model.contract import Head
from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.ledger.model.events import EventCodec
from resource_extend.ledger.model.kinds import program_of
from resource_extend.projections.changes import workloads_contradiction
from resource_extend.projections.node import NodeKind
from resource_extend.projections.storage import KIND, arithmetic, views
from resource_extend.projections.storage.events import EVENTS, encode_record
from resource_extend.projections.storage.state import NodeState, validated, zero_usage
from resource_extend.projections.storage.wire.resources import NodeResource
from resource_extend.projections.storage.wire.stored import read_stored

__all__ = ["STORAGE", "BrokenStream", "NodeState"]


class StorageKind(NodeKind[NodeState, NodeResource]):
    """Volumes, disk quotas and storage space: the ``resource-storage`` plugin's records and
    events."""

    name = KIND
    program = program_of(KIND)
    events: EventCodec = EVENTS
    separator = "; "

    def state(self, capacity: NodeResource, usage: NodeResource) -> NodeState:
        return NodeState(capacity=capacity, usage=usage)

    def follow(self, capacity: NodeResource, usage: NodeResource) -> NodeState:
        """Normalised as every write is; a change that breaks the rules could not have been
        appended, so it breaks the stream."""
        try:
            return validated(capacity, usage)
        except InvalidRequest as exc:
            raise BrokenStream(exc.reason) from None

    def added(self, capacity: NodeResource) -> NodeState:
        return self.follow(capacity, zero_usage(capacity))

    def empty(self) -> NodeState:
        """No volumes, no disks, no storage: as upstream writes such a node."""
        return self.added(NodeResource(volumes={}, disks=[], storage=0))

    def add(self, value: NodeResource, delta: NodeResource) -> NodeResource:
        return arithmetic.add(value, delta)

    def grown(self, capacity: NodeResource, delta: NodeResource) -> NodeResource:
        return arithmetic.without_empty_volumes(arithmetic.add(capacity, delta))

    def describe_value(self, value: NodeResource) -> str:
        return views.describe(value)

    def differences(self, head: NodeState, stream: NodeState) -> list[str]:
        """A ``null`` volume map or disk list and an empty one are the same list to every
        reader, Go's and ours: a node added before 0.9 with no disks holds ``null`` usage disks
        where its stream now folds to ``[]``, and is no different for it."""
        return super().differences(_as_read(head), _as_read(stream))

    def read_head(self, raw: bytes) -> Head[NodeState]:
        capacity, usage, seq = read_stored(raw)
        return Head(state=NodeState(capacity=capacity, usage=usage), seq=seq)

    def write_head(self, state: NodeState, seq: int) -> bytes:
        return encode_record(state.capacity, state.usage, seq)

    def contradiction(self, change: Any) -> str | None:
        def negate(summed: NodeResource) -> NodeResource:
            return arithmetic.subtract(NodeResource(), summed)

        return workloads_contradiction(change, arithmetic.workloads_usage, negate, views.describe)


def _as_read(state: NodeState) -> NodeState:
    return NodeState(capacity=state.capacity.filled(), usage=state.usage.filled())


STORAGE = StorageKind()
