"""The envelope every event of every resource kind shares, and the changes the ledger itself
writes whatever the kind.

An :class:`Event` is an envelope (position, time, cause, operation id, who, schema version)
around one change: a tagged struct, ``{"kind": "usage_changed", ...}``. A resource kind defines
its own changes (subclasses of :class:`Change`) and its node state; the ledger adds the two it
writes itself, :class:`Checkpoint` (compaction) and :class:`HeadRepaired` (``verify --repair``),
which carry a whole state of the kind. :class:`EventCodec` decodes a kind's events.

Schema versions: v1 (the first release) had no ``by``; v2 adds ``by`` and the ``checkpoint`` and
``head_repaired`` kinds; v3 chains them (``prev``, a checkpoint's ``tip``:
``ledger.model.digests``), keeps time monotone (``at`` never before the previous event's; ``clock``,
the writer's own time, when it had to be raised) and snapshots the node every ``SNAPSHOT_EVERY``
events. Every older event decodes as it was written (``v`` keeps its value); an event from a newer
release is refused with a message saying so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar, get_args

import msgspec

SCHEMA_VERSION = 3

SNAPSHOT_EVERY = 1000
"""Events at seqs that are multiples of this carry a snapshot of the node (``Event.snapshot``):
reading the state at any point costs at most this many events, whatever the stream's length."""

S = TypeVar("S", bound=msgspec.Struct)
"""A resource kind's node state (a msgspec struct)."""
C = TypeVar("C")
"""A resource kind's change union."""


class Change(msgspec.Struct, tag_field="kind", kw_only=True):
    """A change's JSON names its kind: ``{"kind": "usage_changed", ...}``."""


class Checkpoint(Change, Generic[S], tag="checkpoint"):
    """Stands in for the events ``first`` .. its own seq, which compaction removed.

    It holds the state after them (``None``: the node had been removed), the time of the last
    event it replaces, and where those events were exported before they were deleted.
    """

    state: S | None
    first: int
    last_at: datetime
    export: str
    tip: str | None = None
    """The digest of the last event it replaced, as stored: what the event after it names
    (from v3; ``ledger.model.digests``)."""
    since: int | None = None
    """The first seq its export holds (from v3): ``first``, or the previous checkpoint's, whose
    own export holds the events before that."""
    export_digest: str | None = None
    """The SHA-256 of its export file as written (from 0.8; ``verify`` checks the file it reads
    against it; a checkpoint without one has its export checked by content alone)."""


class HeadRepaired(Change, Generic[S], tag="head_repaired"):
    """The head disagreed with its stream and was rewritten from the stream's fold."""

    found: str
    """The head as it was found (its JSON, or why it was unreadable or missing)."""
    state: S | None


class Event(msgspec.Struct, Generic[C], kw_only=True):
    seq: int
    at: datetime
    verb: str
    op: str
    change: C
    by: str | None = None
    """``user@host`` of the process that appended it (from v2)."""
    prev: str | None = None
    """The digest of the event before it, as stored (from v3; None for event 1)."""
    clock: datetime | None = None
    """The writer's own time, when it was before the previous event's and ``at`` was raised
    to that (from v3)."""
    v: int = SCHEMA_VERSION
    snapshot: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    """The node record as written with this event, on every ``SNAPSHOT_EVERY``-th seq (from
    v3; absent elsewhere, and when the node was removed): a reader starts its fold there
    instead of at the stream's start. It is part of the event as stored, so chained."""
    retries: int | msgspec.UnsetType = msgspec.UNSET
    """How many compare-and-swaps the call lost to other writers before this event landed
    (absent: none; from 0.6, v3 still: a reader that does not know it passes it by)."""

    @property
    def kind(self) -> str:
        return type(self.change).__struct_config__.tag  # type: ignore[attr-defined,no-any-return]


AnyEvent = Event[Any]
"""An event of any resource kind, as the ledger handles it."""


def tag_of(change: Any) -> str:
    """The tag of a change type (a generic one's alias included)."""
    return str(getattr(change, "__origin__", change).__struct_config__.tag)


_encoder = msgspec.json.Encoder()


def encode(value: msgspec.Struct) -> bytes:
    return _encoder.encode(value)


class _Version(msgspec.Struct):
    v: int = SCHEMA_VERSION


class NewerSchema(msgspec.DecodeError):
    """An event written by a newer release than this one."""


LEDGER_KINDS = frozenset({tag_of(Checkpoint), tag_of(HeadRepaired)})
"""The changes the ledger itself writes into every kind's streams."""


class EventCodec:
    """Decodes the events of one resource kind, whose change union (``changes``) holds its own
    changes and the ledger's ``Checkpoint[S]`` and ``HeadRepaired[S]`` for its state ``S``."""

    def __init__(self, program: str, changes: Any) -> None:
        self.program = program
        self.kinds: tuple[str, ...] = tuple(tag_of(change) for change in get_args(changes))
        if missing := LEDGER_KINDS - set(self.kinds):
            raise TypeError(f"{program}'s change union lacks the ledger's {sorted(missing)}")
        self._decoder = msgspec.json.Decoder(Event[changes])

    def decode(self, raw: bytes) -> AnyEvent:
        """Decode an event of this or any older schema version."""
        try:
            event: AnyEvent = self._decoder.decode(raw)
        except msgspec.DecodeError:
            self._refuse_newer(_version_of(raw))
            raise
        self._refuse_newer(event.v)
        return event

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise NewerSchema(
                f"it has schema v{version}, and this {self.program} reads up to "
                f"v{SCHEMA_VERSION}: upgrade {self.program}"
            )


def _version_of(raw: bytes) -> int:
    try:
        return msgspec.json.decode(raw, type=_Version).v
    except msgspec.DecodeError:
        return SCHEMA_VERSION
