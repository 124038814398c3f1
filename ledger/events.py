"""The events of a node's stream, and the head record that caches their fold.

An :class:`Event` is an envelope (position, time, cause, operation id, who, schema version)
around one :data:`Change`, a tagged union: the change records what happened, never a copy of the
whole state, except where the change *is* a whole state (adoption, absolute sets, rebuilds,
checkpoints, repairs).

Schema versions: v1 (the first release) had no ``by``; v2 adds ``by`` and the ``checkpoint`` and
``head_repaired`` kinds. Every older event decodes as it was written (``v`` keeps its value);
an event from a newer release is refused with a message saying so.
"""

from __future__ import annotations

from datetime import datetime
from typing import get_args

import msgspec

from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.resources import Resource

SCHEMA_VERSION = 2


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


class Snapshot(msgspec.Struct, kw_only=True):
    """A whole node state, inside the changes that carry one."""

    capacity: Cards
    usage: Cards


class Checkpoint(_Change, tag="checkpoint"):
    """Stands in for the events ``first`` .. its own seq, which compaction removed.

    It holds the state after them (``None``: the node had been removed), the time of the last
    event it replaces, and where those events were exported before they were deleted.
    """

    state: Snapshot | None
    first: int
    last_at: datetime
    export: str


class HeadRepaired(_Change, tag="head_repaired"):
    """The head disagreed with its stream and was rewritten from the stream's fold."""

    found: str
    """The head as it was found (its JSON, or why it was unreadable or missing)."""
    state: Snapshot | None


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
    | Checkpoint
    | HeadRepaired
)


KINDS: tuple[str, ...] = tuple(str(change.__struct_config__.tag) for change in get_args(Change))
"""Every change kind, as events name them."""


class Event(msgspec.Struct, kw_only=True):
    seq: int
    at: datetime
    verb: str
    op: str
    change: Change
    by: str | None = None
    """``user@host`` of the process that appended it (from v2)."""
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


class _StoredMap(msgspec.Struct):
    prod_count_map: dict[str, int] | None = None


class _StoredHead(msgspec.Struct):
    """A head as stored, read without the bounds a request must keep: whatever a record holds
    (the upstream plugin's, say), the plugin can still read it, show it, and change it."""

    capacity: _StoredMap | None = None
    usage: _StoredMap | None = None
    seq: int | None = None


_event_decoder = msgspec.json.Decoder(Event)
_head_decoder = msgspec.json.Decoder(_StoredHead)
_encoder = msgspec.json.Encoder()


def encode(value: Event | Head) -> bytes:
    return _encoder.encode(value)


class _Version(msgspec.Struct):
    v: int = SCHEMA_VERSION


class NewerSchema(msgspec.DecodeError):
    """An event written by a newer release than this one."""


def decode_event(raw: bytes) -> Event:
    """Decode an event of this or any older schema version."""
    try:
        event = _event_decoder.decode(raw)
    except msgspec.DecodeError:
        _refuse_newer(_version_of(raw))
        raise
    _refuse_newer(event.v)
    return event


def _refuse_newer(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise NewerSchema(
            f"it has schema v{version}, and this resource-gpu reads up to v{SCHEMA_VERSION}: "
            "upgrade resource-gpu"
        )


def _version_of(raw: bytes) -> int:
    try:
        return msgspec.json.decode(raw, type=_Version).v
    except msgspec.DecodeError:
        return SCHEMA_VERSION


def decode_head(raw: bytes) -> Head:
    stored = _head_decoder.decode(raw)

    def resource(value: _StoredMap | None) -> Resource | None:
        return None if value is None else Resource(prod_count_map=value.prod_count_map)

    return Head(capacity=resource(stored.capacity), usage=resource(stored.usage), seq=stored.seq)
