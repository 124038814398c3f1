"""A node's stream read by position, whatever its length: its ends, the state at any seq, the
seq a time falls on, and a run of events with the state after each, a page at a time.

Event keys are numbers, so a seq is one key away and a stream is never read from its start to
reach its end. The state at a seq is folded from the nearest start before it: an event carrying
a snapshot (every ``SNAPSHOT_EVERY``-th, from v3), or the stream's first event (event 1, or
the checkpoint compaction left). So reading the state anywhere costs at most about
``SNAPSHOT_EVERY`` events, and finding a time ``log2(length)`` single-event reads (times never
run backwards in a stream from v3: ``ledger.model.digests.stamped``).

Every read of one :class:`Positions` is at one etcd revision, so what it shows is one moment.
A fold checks the hash chain over what it reads (``ledger.model.digests``), and the node record's
tip when it reads to the stream's end: what it shows is what the stream holds, or an error that says
where the chain breaks.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.model.audit import BrokenStream, apply, written_at
from resource_extend.ledger.model.digests import first_break, named_by_next, tip_in_head
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import SNAPSHOT_EVERY, AnyEvent
from resource_extend.ledger.model.walk import snapshot_of
from resource_extend.ledger.store import Store
from resource_extend.ledger.store.migration import not_migrated

S = TypeVar("S", bound=msgspec.Struct)
Event = AnyEvent

PROBES = 4
"""Snapshots looked for, newest first, in the one request that finds where a fold starts."""

EVENT_WINDOW = 64
"""Seqs looked through for the event at or after a seq, before a wider search (a gap)."""


class Positions(Generic[S]):
    """One node's stream, read by position at one revision."""

    def __init__(self, store: Store[S], node: str) -> None:
        self.store, self.node = store, node
        keys = store.keys
        self._end = keys.event_span(node)[1]
        reply = store.etcd.txn(
            wire.TxnRequest(
                success=[
                    store.streams.legacy_op(node),
                    wire.get(keys.head(node)),
                    wire.get(keys.event(node, 1), keys_only=True),
                    wire.get(keys.first(node)),
                ]
            )
        )
        legacy, head, one, recorded = reply.ranges()
        if legacy.count:
            raise not_migrated(store.kind.program, node, legacy.count)
        self.revision = reply.header.revision
        self.head: bytes | None = head.kvs[0].value if head.kvs else None
        self.last = self._last()
        """The stream's last seq (0: it is empty)."""
        self.first = 1 if one.kvs else self._first(recorded.kvs[0].value if recorded.kvs else b"")
        """The stream's first seq (0: it is empty)."""

    # -- ends ---------------------------------------------------------------------------------
    # etcd counts every key a range covers, however few it returns: no range here runs to the
    # stream's end from far before it, or a long stream would cost its length each time.

    def _last(self) -> int:
        """The last seq: the head's, when its event is there and none after it (one request,
        that counts two keys); else (no head of ours: a removed node, or the upstream
        plugin's) the last key, which costs etcd the stream's length, once."""
        seq = self._head_seq()
        if seq:
            at, past = self._txn(self._exactly(seq, keys_only=True), self._from(seq + 1))
            if at.kvs and not past.kvs:
                return seq
        reply = self._range(
            self.store.scans.end_range(self.node, "DESCEND", revision=self.revision)
        )
        return self._seq(reply.kvs[0].key) if reply.kvs else 0

    def _first(self, recorded: bytes) -> int:
        """The first seq, when it is not 1 (a compacted stream starts at its checkpoint): the
        seq the last compaction recorded, when its event is there and none before it (one
        request, that counts one key); else found in windows that double in width from seq 1,
        so the one that finds it holds at most about as many keys as the stream, and fewer
        than the seq it finds."""
        if recorded.isdigit() and 0 < int(recorded) <= self.last:
            seq = int(recorded)
            below = self._window(0, seq, limit=1)
            at, before = self._txn(self._exactly(seq, keys_only=True), below)
            if at.kvs and not before.kvs:
                return seq
        start, width = 1, EVENT_WINDOW
        while self.last and start <= self.last:
            keys = self._range(self._window(start, start + width, limit=1)).kvs
            if keys:
                return self._seq(keys[0].key)
            start, width = start + width, width * 2
        return 0

    def _head_seq(self) -> int | None:
        if self.head is None:
            return None
        try:
            return self.store.kind.read_head(self.head).seq
        except msgspec.DecodeError:
            return None

    # -- single events --------------------------------------------------------------------------

    def at_or_after(self, seq: int) -> Event | None:
        """The first event at ``seq`` or after it (None: none), looked for in a window of
        ``EVENT_WINDOW`` seqs, then (past a gap that wide) to the end."""
        kvs = self._range(self._window(seq, seq + EVENT_WINDOW, limit=1)).kvs
        if not kvs:
            kvs = self._range(self._from(seq)).kvs
        return self.store.streams.decode_event(self.node, kvs[0]) if kvs else None

    def seq_at(self, when: datetime) -> int | None:
        """The last event written at or before ``when`` (a checkpoint: by the time of the last
        event it replaced); None when the first is later. Bisected for: times never run
        backwards in a stream."""
        first = self.at_or_after(self.first) if self.first else None
        if first is None or written_at(first) > when:
            return None
        low, high = first.seq, self.last + 1  # written_at(low) <= when; none at high
        while high - low > 1:
            middle = (low + high) // 2
            event = self.at_or_after(middle)
            if event is None or event.seq >= high:
                high = middle
            elif written_at(event) <= when:
                low = event.seq
            else:
                high = event.seq
        return low

    def events(self, after: int, until: int) -> Iterator[Event]:
        """The events ``after + 1`` .. ``until``, a page at a time, not folded."""
        if until <= after:
            return
        opened = self.store.streams.open_stream(
            self.node, after=after, until=until, revision=self.revision
        )
        for page in opened.pages:
            yield from page.events

    # -- states ---------------------------------------------------------------------------------

    def rows(self, after: int, until: int) -> Iterator[tuple[Event, S | None]]:
        """The events ``after + 1`` .. ``until``, each with the state after it, a page at a
        time; folded from the nearest snapshot (or the stream's start) at or before ``after``."""
        if until <= after:
            return
        start = self._start(after)
        state: S | None = None
        expected = start
        before: tuple[Event, bytes] | None = None
        for event, stored in self._stored(start - 1, until):
            if event.seq != expected:
                raise self._missing(expected, event.seq - 1)
            expected += 1
            if before is not None:
                self._check_link(before, (event, stored))
            before = event, stored
            if event.seq == start and event.snapshot is not msgspec.UNSET:
                state = snapshot_of(self.store.kind, event)
            else:
                try:
                    state = apply(self.store.kind, state, event.change)
                except BrokenStream as exc:
                    raise PluginError(
                        f"the stream is broken at seq {event.seq}: {exc} (see: "
                        f"{self.store.kind.program} verify {self.node})",
                        node=self.node,
                    ) from None
            if event.seq > after:
                yield event, state
        if expected <= min(until, self.last):
            raise self._missing(expected, min(until, self.last))
        if before is not None and before[0].seq == self.last and self.head is not None:
            self._check_tip(*before)

    def _stored(self, after: int, until: int) -> Iterator[tuple[Event, bytes]]:
        """The events ``after + 1`` .. ``until``, each with its etcd value, a page at a time."""
        opened = self.store.streams.open_stream(
            self.node, after=after, until=until, revision=self.revision
        )
        for page in opened.pages:
            yield from zip(page.events, page.raw, strict=True)

    def _check_link(self, before: tuple[Event, bytes], event: tuple[Event, bytes]) -> None:
        """The event names the one before it as stored (``ledger.model.digests``)."""
        broken = first_break([before[0], event[0]], [before[1], event[1]])
        if broken is not None:
            raise self._broken(broken.reason)

    def _check_tip(self, last: Event, stored: bytes) -> None:
        """The node record names the stream's last event as stored (when it names one)."""
        assert self.head is not None
        tip = tip_in_head(self.head).digest
        if tip is not None and tip != named_by_next(last, stored):
            raise self._broken(f"the node record does not name event {last.seq} as stored")

    def _broken(self, reason: str) -> PluginError:
        return PluginError(
            f"the stream's hash chain does not hold: {reason}; nothing folded from it is "
            f"shown (see: {self.store.kind.program} verify {self.node})",
            node=self.node,
        )

    def _missing(self, first: int, last: int) -> PluginError:
        return PluginError(
            f"events {first}..{last} are missing from the stream: nothing after them can be "
            f"folded (see: {self.store.kind.program} verify {self.node})",
            node=self.node,
        )

    def _start(self, after: int) -> int:
        """Where a fold that must reach ``after + 1`` starts: the newest of the ``PROBES``
        snapshot seqs at or before ``after`` whose event holds a readable snapshot; else the
        stream's first event (folded from nothing: a checkpoint holds its state)."""
        newest = after // SNAPSHOT_EVERY * SNAPSHOT_EVERY
        probes = [
            seq
            for seq in range(newest, newest - PROBES * SNAPSHOT_EVERY, -SNAPSHOT_EVERY)
            if seq > self.first
        ]
        if probes:
            found_at = self._txn(*(self._exactly(seq) for seq in probes))
            for seq, found in zip(probes, found_at, strict=True):
                if found.kvs:
                    event = self.store.streams.decode_event(self.node, found.kvs[0])
                    if snapshot_of(self.store.kind, event) is not None:
                        return seq
        return self.first

    # -- requests -------------------------------------------------------------------------------

    def _from(self, seq: int) -> wire.RangeRequest:
        """Any key from ``seq`` on: for a seq near the stream's end (etcd counts what follows)."""
        key = self.store.keys.event(self.node, max(seq, 0))
        return wire.RangeRequest(
            key=key, range_end=self._end, limit=1, keys_only=True, revision=self.revision
        )

    def _window(self, start: int, stop: int, *, limit: int = 0) -> wire.RangeRequest:
        keys = self.store.keys
        return wire.RangeRequest(
            key=keys.event(self.node, max(start, 0)),
            range_end=keys.event(self.node, stop),
            limit=limit,
            revision=self.revision,
        )

    def _exactly(self, seq: int, *, keys_only: bool = False) -> wire.RangeRequest:
        key = self.store.keys.event(self.node, seq)
        return wire.RangeRequest(key=key, keys_only=keys_only, revision=self.revision)

    def _range(self, request: wire.RangeRequest) -> wire.RangeResponse:
        return self.store.etcd.read_range(request)

    def _txn(self, *requests: wire.RangeRequest) -> list[wire.RangeResponse]:
        ops = [wire.RequestOp(request_range=request) for request in requests]
        return self.store.etcd.txn(wire.TxnRequest(success=ops)).ranges()

    def _seq(self, key: bytes) -> int:
        return self.store.keys.seq_of(self.node, key)
