"""A node's stream read by position, whatever its length: its ends, the state at any seq, the
seq a time falls on, and a run of events with the state after each, a page at a time.

Event keys are numbers, so a seq is one key away and a stream is never read from its start to
reach its end. The state at a seq is folded from the nearest start before it: an event carrying
a snapshot (every ``SNAPSHOT_EVERY``-th, from v3), or the stream's first event (event 1, or
the checkpoint compaction left). So reading the state anywhere costs at most about
``SNAPSHOT_EVERY`` events, and finding a time ``log2(length)`` single-event reads (times never
run backwards in a stream from v3: ``ledger.digests.stamped``).

Every read of one :class:`Positions` is at one etcd revision, so what it shows is one moment.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger import wire
from resource_extend.ledger.audit import BrokenStream, apply, written_at
from resource_extend.ledger.errors import PluginError
from resource_extend.ledger.events import SNAPSHOT_EVERY, AnyEvent
from resource_extend.ledger.migration import not_migrated
from resource_extend.ledger.store import Store
from resource_extend.ledger.walk import snapshot_of

S = TypeVar("S", bound=msgspec.Struct)
Event = AnyEvent

PROBES = 4
"""Snapshots looked for, newest first, in the one request that finds where a fold starts."""


class Positions(Generic[S]):
    """One node's stream, read by position at one revision."""

    def __init__(self, store: Store[S], node: str) -> None:
        self.store, self.node = store, node
        keys = store.keys
        start, self._end = keys.event_span(node)
        reply = store._txn(
            wire.TxnRequest(
                success=[
                    store._legacy_op(node),
                    wire.get(keys.head(node)),
                    wire.get(start, self._end, limit=1, keys_only=True),
                ]
            )
        )
        legacy, head, first = reply.ranges()
        if legacy.count:
            raise not_migrated(store.kind.program, node, legacy.count)
        self.revision = reply.header.revision
        self.head: bytes | None = head.kvs[0].value if head.kvs else None
        self.first = store.keys.seq_of(node, first.kvs[0].key) if first.kvs else 0
        """The stream's first seq (0: it is empty)."""
        self.last = self._last() if self.first else 0
        """The stream's last seq (0: it is empty)."""

    # -- ends ---------------------------------------------------------------------------------

    def _last(self) -> int:
        """The last seq: the head's, when its event is there and none after it (one request);
        else found by bisection over which keys exist."""
        seq = self._head_seq()
        if seq is not None and seq >= self.first:
            at, past = self._txn(self._from(seq, keys_only=True), self._from(seq + 1))
            if at.kvs and self._seq(at.kvs[0].key) == seq and not past.kvs:
                return seq
        low, step = self.first, 1  # any(low) holds; find high with any(high) false
        while self._any(low + step):
            low, step = low + step, step * 2
        high = low + step
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if self._any(middle) else (low, middle)
        return low

    def _head_seq(self) -> int | None:
        if self.head is None:
            return None
        try:
            return self.store.kind.read_head(self.head).seq
        except msgspec.DecodeError:
            return None

    def _any(self, seq: int) -> bool:
        return bool(self._range(self._from(seq, keys_only=True)).kvs)

    # -- single events --------------------------------------------------------------------------

    def at_or_after(self, seq: int) -> Event | None:
        """The first event at ``seq`` or after it (None: none)."""
        kvs = self._range(self._from(seq)).kvs
        return self.store._decode_event(self.node, kvs[0]) if kvs else None

    def seq_at(self, when: datetime) -> int | None:
        """The last event written at or before ``when`` (a checkpoint: by the time of the last
        event it replaced); None when the first event is later."""
        first = self.at_or_after(self.first)
        if first is None or written_at(first) > when:
            return None
        low, high = first.seq, self.last + 1  # written_at(low) <= when; none at high
        while high - low > 1:
            event = self.at_or_after((low + high) // 2)
            if event is None or event.seq >= high:
                high = (low + high) // 2
            elif written_at(event) <= when:
                low = event.seq
            else:
                high = event.seq
        return low

    def events(self, after: int, until: int) -> Iterator[Event]:
        """The events ``after + 1`` .. ``until``, a page at a time, not folded."""
        if until <= after:
            return
        opened = self.store.open_stream(self.node, after=after, until=until, revision=self.revision)
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
        for event in self.events(start - 1, until):
            if event.seq != expected:
                raise self._missing(expected, event.seq - 1)
            expected += 1
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
            for seq, found in zip(probes, self._txn(*map(self._exactly, probes)), strict=True):
                if found.kvs:
                    event = self.store._decode_event(self.node, found.kvs[0])
                    if snapshot_of(self.store.kind, event) is not None:
                        return seq
        return self.first

    # -- requests -------------------------------------------------------------------------------

    def _from(self, seq: int, *, keys_only: bool = False) -> wire.RangeRequest:
        key = self.store.keys.event(self.node, max(seq, 0))
        return wire.RangeRequest(
            key=key, range_end=self._end, limit=1, keys_only=keys_only, revision=self.revision
        )

    def _exactly(self, seq: int) -> wire.RangeRequest:
        return wire.RangeRequest(key=self.store.keys.event(self.node, seq), revision=self.revision)

    def _range(self, request: wire.RangeRequest) -> wire.RangeResponse:
        return self.store._range(request)

    def _txn(self, *requests: wire.RangeRequest) -> list[wire.RangeResponse]:
        ops = [wire.RequestOp(request_range=request) for request in requests]
        return self.store._txn(wire.TxnRequest(success=ops)).ranges()

    def _seq(self, key: bytes) -> int:
        return self.store.keys.seq_of(self.node, key)
