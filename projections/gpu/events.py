"""GPU's changes, its node record, and the codec for its events.

A change records what happened, never a copy of the whole state, except where the change *is*
a whole state (adoption, absolute sets, rebuilds). The ledger's own changes (checkpoints, head
repairs) carry a :class:`NodeState`.
"""

from __future__ import annotations

from typing import Union

import msgspec

from resource_extend.ledger.model import events as ledger_events
from resource_extend.ledger.model.events import (
    SCHEMA_VERSION,
    Checkpoint,
    EventCodec,
    HeadRepaired,
    NewerSchema,
    encode,
)
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
from resource_extend.projections.gpu import KIND
from resource_extend.projections.gpu.cards import Cards, normalised
from resource_extend.projections.gpu.resources import Resource
from resource_extend.projections.gpu.state import NodeState

__all__ = [
    "EVENTS",
    "KINDS",
    "SCHEMA_VERSION",
    "Adopted",
    "CapacityChanged",
    "CapacitySet",
    "Change",
    "Checkpoint",
    "Event",
    "GpuChange",
    "GpuRecord",
    "HeadRepaired",
    "NewerSchema",
    "NodeAdded",
    "NodeInfoSet",
    "NodeRemoved",
    "Snapshot",
    "UsageChanged",
    "UsageRebuilt",
    "UsageSet",
    "decode_event",
    "decode_head",
    "encode",
]

Snapshot = NodeState
"""The whole state a checkpoint or a head repair carries."""


GpuChange = Union[  # noqa: UP007 (a runtime union of generic aliases)
    NodeAdded[Cards],
    Adopted[Cards],
    CapacitySet[Cards],
    CapacityChanged[Cards],
    UsageChanged[Cards, Cards],
    UsageSet[Cards],
    NodeInfoSet[Cards],
    UsageRebuilt[Cards],
    NodeRemoved,
    Checkpoint[NodeState],
    HeadRepaired[NodeState],
]

Change = GpuChange
"""Any change of a GPU stream (the ledger's checkpoints and repairs included)."""

Event = ledger_events.Event[GpuChange]
"""A GPU event."""

EVENTS = EventCodec(program_of(KIND), GpuChange)
KINDS = EVENTS.kinds
"""Every change kind, as GPU events name them."""

decode_event = EVENTS.decode


class GpuRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The node record at ``<prefix>/resource/gpu/<node>``.

    ``capacity`` and ``usage`` keep the upstream JSON shape so the Go plugin and this one can
    read each other's records; ``seq`` is the stream position (absent in upstream records).
    """

    capacity: Resource | None = None
    usage: Resource | None = None
    seq: int | None = None


class _StoredMap(msgspec.Struct):
    prod_count_map: dict[str, int] | None = None


class _StoredHead(msgspec.Struct):
    """A head as stored, read without the bounds a request must keep: whatever a record holds
    (the upstream plugin's, say), the plugin can still read it, show it, and change it."""

    capacity: _StoredMap | None = None
    usage: _StoredMap | None = None
    seq: int | None = None


_head_decoder = msgspec.json.Decoder(_StoredHead)


def read_stored_head(raw: bytes) -> tuple[Cards, Cards, int | None]:
    """A head's capacity and usage, normalised, and its seq; the fast path of many-node
    reads (``null`` maps and resources are empty)."""
    stored = _head_decoder.decode(raw)
    return _cards(stored.capacity), _cards(stored.usage), stored.seq


def _cards(value: _StoredMap | None) -> Cards:
    found = value.prod_count_map if value is not None else None
    if not found:
        return {}
    if len(found) == 1 and 0 not in found.values():
        return found  # one product (most nodes): normalised as decoded, and a map of its own
    return normalised(found)


def decode_head(raw: bytes) -> GpuRecord:
    stored = _head_decoder.decode(raw)

    def resource(value: _StoredMap | None) -> Resource | None:
        return None if value is None else Resource(prod_count_map=value.prod_count_map)

    return GpuRecord(
        capacity=resource(stored.capacity), usage=resource(stored.usage), seq=stored.seq
    )
