"""The events of a node's stream, and the head record that caches their fold.

An :class:`Event` is an envelope (position, time, cause, operation id, schema version) around one
:data:`Change`, a tagged union: the change records what happened, never a copy of the whole
state, except where the change *is* a whole state (adoption, absolute sets, rebuilds).
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from ledger.cards import Cards
from ledger.resources import Resource

SCHEMA_VERSION = 1


class _Change(msgspec.Struct, tag_field="kind", kw_only=True):
    """A change's JSON names its kind: ``{"kind": "usage_changed", ...}``."""


class NodeAdded(_Change, tag="node_added"):
    capacity: Cards


class Adopted(_Change, tag="adopted"):
    """A head written by the upstream Go plugin, taken over as found."""

    capacity: Cards
    usage: Cards


class CapacitySet(_Change, tag="capacity_set"):
    capacity: Cards


class CapacityChanged(_Change, tag="capacity_changed"):
    delta: Cards


class UsageChanged(_Change, tag="usage_changed"):
    """Cards taken (positive) or given back (negative), with the workloads that caused it."""

    delta: Cards
    workloads: list[Cards] | None = None


class UsageSet(_Change, tag="usage_set"):
    usage: Cards


class NodeInfoSet(_Change, tag="node_info_set"):
    capacity: Cards
    usage: Cards


class UsageRebuilt(_Change, tag="usage_rebuilt"):
    """fix-node-resource: usage set to the workload sums, with the differences it found."""

    usage: Cards
    diffs: list[str]


class NodeRemoved(_Change, tag="node_removed"):
    pass


Change = (
    NodeAdded
    | Adopted
    | CapacitySet
    | CapacityChanged
    | UsageChanged
    | UsageSet
    | NodeInfoSet
    | UsageRebuilt
    | NodeRemoved
)


class Event(msgspec.Struct, kw_only=True):
    seq: int
    at: datetime
    verb: str
    op: str
    change: Change
    v: int = SCHEMA_VERSION

    @property
    def kind(self) -> str:
        return type(self.change).__struct_config__.tag  # type: ignore[return-value]


class Head(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The node record at ``<prefix>/resource/gpu/<node>``.

    ``capacity`` and ``usage`` keep the upstream JSON shape so the Go plugin and this one can
    read each other's records; ``seq`` is the stream position (absent in upstream records).
    """

    capacity: Resource | None = None
    usage: Resource | None = None
    seq: int | None = None


_event_decoder = msgspec.json.Decoder(Event)
_head_decoder = msgspec.json.Decoder(Head)
_encoder = msgspec.json.Encoder()


def encode(value: Event | Head) -> bytes:
    return _encoder.encode(value)


def decode_event(raw: bytes) -> Event:
    return _event_decoder.decode(raw)


def decode_head(raw: bytes) -> Head:
    return _head_decoder.decode(raw)
