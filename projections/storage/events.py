"""resource-storage's events (the shared changes of ``projections.changes`` over its values),
its node record, and the codec for its events.

Deltas are signed :class:`NodeResource` values: bytes per volume path, the storage total, and
quota per disk device; a capacity delta that leaves a volume at exactly 0 removes it.
"""

from __future__ import annotations

from typing import Union

import msgspec

from resource_extend.ledger.model import events as ledger_events
from resource_extend.ledger.model.events import Checkpoint, EventCodec, HeadRepaired
from resource_extend.ledger.model.kinds import program_of
from resource_extend.projections.changes import (
    Adopted,
    CapacityChanged,
    CapacitySet,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from resource_extend.projections.gojson import go_escaped
from resource_extend.projections.storage import KIND
from resource_extend.projections.storage.state import NodeState
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource
from resource_extend.projections.storage.wire.stored import StoredRecord

StorageChange = Union[  # noqa: UP007 (a runtime union of generic aliases)
    NodeAdded[NodeResource],
    Adopted[NodeResource],
    CapacitySet[NodeResource],
    CapacityChanged[NodeResource],
    UsageChanged[NodeResource, WorkloadResource],
    UsageSet[NodeResource],
    NodeInfoSet[NodeResource],
    UsageRebuilt[NodeResource],
    NodeRemoved,
    Checkpoint[NodeState],
    HeadRepaired[NodeState],
]

Change = StorageChange
"""Any change of a storage stream (the ledger's checkpoints and repairs included)."""

Event = ledger_events.Event[StorageChange]

EVENTS = EventCodec(program_of(KIND), StorageChange)
KINDS = EVENTS.kinds
"""Every change kind, as storage events name them."""

_record_encoder = msgspec.json.Encoder(order="deterministic")


def encode_record(capacity: NodeResource, usage: NodeResource, seq: int) -> bytes:
    """The node record: upstream's JSON (fields in Go's order, map keys sorted, strings
    escaped as Go escapes them: ``projections.gojson``), plus seq."""
    encoded = _record_encoder.encode(StoredRecord(capacity=capacity, usage=usage, seq=seq))
    return go_escaped(encoded)


__all__ = [
    "EVENTS",
    "KINDS",
    "Adopted",
    "CapacityChanged",
    "CapacitySet",
    "Change",
    "Event",
    "NodeAdded",
    "NodeInfoSet",
    "NodeRemoved",
    "StorageChange",
    "UsageChanged",
    "UsageRebuilt",
    "UsageSet",
    "encode_record",
]
