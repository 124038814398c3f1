"""The hash chain that makes a stream tamper-evident.

From schema v3 every event names, in ``prev``, the digest of the event before it: SHA-256 of
that event exactly as stored (its etcd value). A checkpoint stands in for the events it
replaced, so it carries, in ``tip``, the digest of the last of them: what the event after it
names. Editing, deleting, inserting, duplicating or reordering an event, or forging a
checkpoint, breaks the chain at the first event after the change: :func:`first_break` finds it.

The chain proves a stream consistent with itself, not with what was written: whoever can
rewrite etcd can rewrite a whole history and its digests. An auditor who keeps a stream's
digest (``verify --digests`` prints each) outside etcd detects that too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

import msgspec

from resource_extend.ledger.model.events import AnyEvent, Checkpoint

CHAINED_FROM = 3
"""The first schema version whose events carry ``prev``."""


def digest(stored: bytes) -> str:
    """SHA-256 of an event as stored, in hex."""
    return hashlib.sha256(stored).hexdigest()


def named_by_next(event: AnyEvent, stored: bytes) -> str:
    """The digest the event after ``event`` names: a checkpoint's ``tip`` (the digest of the
    last event it replaced), else the digest of ``event`` itself."""
    change = event.change
    if isinstance(change, Checkpoint) and change.tip is not None:
        tip: str = change.tip
        return tip
    return digest(stored)


class Break(msgspec.Struct, frozen=True):
    """Where a chain stops holding: the first event whose ``prev`` is not what it should be."""

    seq: int
    reason: str


def first_break(events: Sequence[AnyEvent], stored: Sequence[bytes]) -> Break | None:
    """The first event, in a gapless run of ``events`` (``stored``: their etcd values), that
    does not name its predecessor; None when the chain holds. An event before v3 names
    nothing, so its own link is not checked (an older release may still write some during a
    rolling upgrade); the v3 event after it names it, so it cannot change unseen either."""
    for index in range(1, len(events)):
        before, event = events[index - 1], events[index]
        if event.v < CHAINED_FROM:
            continue
        expected = named_by_next(before, stored[index - 1])
        if event.prev != expected:
            return Break(
                event.seq,
                f"event {event.seq} does not name event {before.seq} as stored "
                f"(prev {_short(event.prev)}, event {before.seq} digests to {_short(expected)})",
            )
    return None


def _short(value: str | None) -> str:
    return "none" if value is None else value[:12]


class Tip(msgspec.Struct, frozen=True):
    """Where a stream ends, as the event appended next must know it: the digest it names, and
    the time it may not be before (None, None: an empty stream)."""

    digest: str | None = None
    at: datetime | None = None


EMPTY = Tip()


def tip_of(event: AnyEvent, stored: bytes) -> Tip:
    """The tip of a stream that ends with ``event`` (``stored``: its etcd value)."""
    return Tip(named_by_next(event, stored), event.at)


class _HeadTip(msgspec.Struct, omit_defaults=True):
    """The ledger's fields in a node record, beside the kind's own (and ``seq``)."""

    tip: str | None = None
    at: datetime | None = None


_head_tip = msgspec.json.Decoder(_HeadTip)


def tip_in_head(raw: bytes) -> Tip:
    """The tip a node record carries (EMPTY when it carries none: a record written before v3,
    or by the upstream plugin)."""
    try:
        found = _head_tip.decode(raw)
    except msgspec.DecodeError:
        return EMPTY
    return Tip(found.tip, found.at)


def with_tip(head: bytes, tip: Tip) -> bytes:
    """A kind's node record (a JSON object, as the kind wrote it) with the tip added, so the
    next write knows it without reading the event; the upstream plugin ignores the fields."""
    extra = msgspec.json.encode(_HeadTip(tip.digest, tip.at))
    if extra == b"{}":
        return head
    return extra if head.strip() == b"{}" else head.rstrip()[:-1] + b"," + extra[1:]


def stamped(now: datetime, tip: Tip) -> tuple[datetime, datetime | None]:
    """An event's time and, when the writer's clock is behind the stream's, that clock: time
    in a stream never runs backwards, and the writer's own reading is kept."""
    if tip.at is not None and now < tip.at:
        return tip.at, now
    return now, None
