"""A stream checked and folded as it is read, one page at a time, so that auditing a stream
costs memory in the page, not in the stream's length. Pure: ``ledger.store`` reads the pages.

A :class:`Walk` is fed the events in order (each with its stored bytes) and keeps only what the
next event needs: the state, the last event and its digest, and the problems found so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.model.audit import (
    BrokenStream,
    apply,
    order_problems,
    stamped_ahead,
    start_problems,
)
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.digests import CHAINED_FROM, named_by_next
from resource_extend.ledger.model.events import AnyEvent

S = TypeVar("S", bound=msgspec.Struct)
Event = AnyEvent


def snapshot_of(kind: Kind[S], event: Event) -> S | None:
    """The state an event's snapshot holds (None: it has none, or one that cannot be read)."""
    if event.snapshot is msgspec.UNSET:
        return None
    try:
        return kind.read_head(bytes(event.snapshot)).state
    except msgspec.DecodeError:
        return None


class Walk(Generic[S]):
    """Checks a stream from its start, fed in order: it must begin at event 1 or at a checkpoint and
    run without gaps; each event must name its predecessor (``ledger.model.digests``); each change
    must agree with itself (``Kind.contradiction``) and follow the state before it, never into an
    impossible state (``Kind.invalid``); a snapshot must hold the state folded there. An event
    stamped by a clock ahead is noted, not a problem (``notes``).

    A fold that fails or an impossible state stops the fold (``broken``): what comes after it
    proves nothing, but the chain is still followed, for an edited event shows as a fold gone
    wrong before the next event shows it edited. A broken chain stops the walk. A gap is
    reported and folded across.
    """

    def __init__(self, kind: Kind[S]) -> None:
        self.kind = kind
        self.state: S | None = None
        self.first: Event | None = None
        self.last: Event | None = None
        self.last_raw = b""
        self.problems: list[str] = []
        self.broken = False
        """The chain or the fold failed: the state is not the stream's, and no repair may
        trust it."""
        self.notes: list[str] = []
        """What is worth saying but is no disagreement: an event stamped by a clock ahead
        (``audit.stamped_ahead``)."""
        self._gapless = True
        self._chain_broken = False

    def feed(self, events: Sequence[Event], raw: Sequence[bytes] | None = None) -> None:
        """The next events (``raw``: as stored; without them the chain is not checked)."""
        for index, event in enumerate(events):
            self._follow(event, raw[index] if raw is not None else None)

    def _follow(self, event: Event, stored: bytes | None) -> None:
        before, before_raw = self.last, self.last_raw
        self.last, self.last_raw = event, stored or b""
        if before is None:
            self.first = event
        if self._chain_broken:
            return
        for problem in start_problems(event) if before is None else order_problems(before, event):
            self._gap(problem)
        if stored is not None and before is not None and self._gapless and event.v >= CHAINED_FROM:
            expected = named_by_next(before, before_raw)
            if event.prev != expected:
                self._break(
                    f"the chain breaks at seq {event.seq}: event {event.seq} does not name "
                    f"event {before.seq} as stored (prev {_short(event.prev)}, event "
                    f"{before.seq} digests to {_short(expected)})"
                )
                self._chain_broken = True
                return
        if before is not None and (note := stamped_ahead(before, event)) is not None:
            self.notes.append(note)
        if self.broken:
            return
        contradiction = self.kind.contradiction(event.change)
        if contradiction is not None:
            self._break(f"event {event.seq} contradicts itself: {contradiction}")
            return
        try:
            self.state = apply(self.kind, self.state, event.change)
        except BrokenStream as exc:
            self._break(f"the stream is broken at seq {event.seq}: {exc}")
            return
        wrong = self.kind.invalid(self.state) if self.state is not None else None
        if wrong is not None:
            self._break(f"the stream is impossible at seq {event.seq}: {wrong}")
            return
        if event.snapshot is not msgspec.UNSET and snapshot_of(self.kind, event) != self.state:
            self._break(
                f"the snapshot in event {event.seq} is not the state folded there "
                f"({self._described()})"
            )

    def _gap(self, problem: str) -> None:
        self.problems.append(problem)
        self._gapless = False

    def _break(self, problem: str) -> None:
        self.problems.append(problem)
        self.broken = True

    def _described(self) -> str:
        return self.kind.describe(self.state) if self.state is not None else "the node removed"


def _short(value: str | None) -> str:
    return "none" if value is None else value[:12]
