"""resource-storage's changes, its node record, and the codec for its events.

A change records what happened, never a copy of the whole state, except where the change *is*
a whole state (adoption, absolute sets, rebuilds). Deltas are signed :class:`NodeResource`
values: bytes per volume path, the storage total, and quota per disk device.
"""

from __future__ import annotations

from typing import Union

import msgspec

from resource_extend.ledger import events as ledger_events
from resource_extend.ledger.events import Change as LedgerChange
from resource_extend.ledger.events import Checkpoint, EventCodec, HeadRepaired
from resource_extend.projections.storage.resources import NodeResource, WorkloadResource
from resource_extend.projections.storage.state import NodeState
from resource_extend.projections.storage.stored import StoredRecord


class NodeAdded(LedgerChange, tag="node_added"):
    capacity: NodeResource


class Adopted(LedgerChange, tag="adopted"):
    """A record written by the upstream Go plugin, taken over as found."""

    capacity: NodeResource
    usage: NodeResource


class CapacitySet(LedgerChange, tag="capacity_set"):
    """set-node-resource-capacity with delta=false: the capacity replaced (rm-disks included)."""

    capacity: NodeResource


class CapacityChanged(LedgerChange, tag="capacity_changed"):
    """Capacity added (positive) or taken away (negative); volumes that reach exactly 0 go."""

    delta: NodeResource


class UsageChanged(LedgerChange, tag="usage_changed"):
    """Volumes, storage and disk quota taken (positive) or given back (negative), with the
    workloads that caused it when core named them."""

    delta: NodeResource
    workloads: list[WorkloadResource] | None = None


class UsageSet(LedgerChange, tag="usage_set"):
    usage: NodeResource


class NodeInfoSet(LedgerChange, tag="node_info_set"):
    capacity: NodeResource
    usage: NodeResource


class UsageRebuilt(LedgerChange, tag="usage_rebuilt"):
    """fix-node-resource: usage set to the workloads' sums, with the differences it found."""

    usage: NodeResource
    diffs: list[str]


class NodeRemoved(LedgerChange, tag="node_removed"):
    pass


StorageChange = Union[  # noqa: UP007 (a runtime union of generic aliases)
    NodeAdded,
    Adopted,
    CapacitySet,
    CapacityChanged,
    UsageChanged,
    UsageSet,
    NodeInfoSet,
    UsageRebuilt,
    NodeRemoved,
    Checkpoint[NodeState],
    HeadRepaired[NodeState],
]

Change = StorageChange
"""Any change of a storage stream (the ledger's checkpoints and repairs included)."""

Event = ledger_events.Event[StorageChange]

EVENTS = EventCodec("resource-storage", StorageChange)
KINDS = EVENTS.kinds
"""Every change kind, as storage events name them."""

_record_encoder = msgspec.json.Encoder(order="deterministic")


def encode_record(capacity: NodeResource, usage: NodeResource, seq: int) -> bytes:
    """The node record: upstream's JSON (fields in Go's order, map keys sorted), plus seq."""
    return _record_encoder.encode(StoredRecord(capacity=capacity, usage=usage, seq=seq))
