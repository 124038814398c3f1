"""Reading a node's stream: the events of a span of seqs, a page at a time, at one etcd
revision. One of :class:`ledger.store.Store`'s parts (``store.streams``).

Pages are windows of seqs, never a range to the stream's end: etcd counts every key a range
covers, however few it returns, so paging a long stream by open ranges would cost time in the
square of its length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.errors import StoreError
from resource_extend.ledger.model.events import AnyEvent
from resource_extend.ledger.store.keys import KeyLayout, range_end
from resource_extend.ledger.store.migration import not_migrated

S = TypeVar("S", bound=msgspec.Struct)
Event = AnyEvent

EVENT_PAGE = 1000
"""Events per range request when reading a stream (keeps replies far below gRPC's 4 MiB)."""


class Stream(msgspec.Struct, frozen=True):
    """A node's head and (part of) its stream, read at one etcd revision."""

    head: bytes | None
    """The head's stored value, undecoded (``None``: no head)."""
    head_revision: int
    events: list[Event]
    raw_events: list[bytes]
    """Each event as stored (the etcd value), in step with ``events``."""
    event_revisions: list[int]
    """Each event key's ``mod_revision``, in step with ``events``."""
    stopped_at: int | None = None
    """The seq of the event the read stopped before (``read_stream``'s ``stop``), if any."""


class Page(msgspec.Struct, frozen=True):
    """One range of a stream: its events, each as stored, and each key's ``mod_revision``."""

    events: list[Event]
    raw: list[bytes]
    revisions: list[int]


class OpenStream(msgspec.Struct, frozen=True):
    """A node's head and its stream's pages, not read yet: ``Store.open_stream``."""

    head: bytes | None
    head_revision: int
    revision: int
    """The etcd revision every page is read at."""
    pages: Iterator[Page]


class StreamReads(Generic[S]):
    """Stream reads over ``etcd`` for one resource kind (``kind``; ``keys``: its layout)."""

    def __init__(self, etcd: Connection, keys: KeyLayout, kind: Kind[S]) -> None:
        self.etcd = etcd
        self.keys = keys
        self.kind = kind

    def legacy_op(self, node: str) -> wire.RequestOp:
        old = self.keys.legacy_events(node)
        return wire.get(old, range_end(old), limit=1, keys_only=True)

    def events(self, node: str, after: int = 0) -> list[Event]:
        """The node's stream, oldest first, from position ``after + 1``."""
        return self.read_stream(node, after=after).events

    def read_stream(
        self,
        node: str,
        *,
        after: int = 0,
        until: int | None = None,
        stop: Callable[[Event], bool] | None = None,
        first_page: int = EVENT_PAGE,
    ) -> Stream:
        """The head and the events ``after + 1`` .. ``until`` (default: the end), oldest first,
        read at one revision (``open_stream``), all in memory: for a part of a stream whose
        length is bounded (a compaction's cut), or a stream known to be short.

        ``stop`` ends the read before the first event it is true of (its seq is kept as
        ``stopped_at``); with a small ``first_page`` a read that stops early costs one small
        request, whatever the stream's length.
        """
        opened = self.open_stream(node, after=after, until=until, first_page=first_page)
        events: list[Event] = []
        raw: list[bytes] = []
        revisions: list[int] = []
        stopped_at: int | None = None
        for page in opened.pages:
            for event, value, revision in zip(page.events, page.raw, page.revisions, strict=True):
                if stop is not None and stop(event):
                    stopped_at = event.seq
                    break
                events.append(event)
                raw.append(value)
                revisions.append(revision)
            if stopped_at is not None:
                break
        return Stream(
            head=opened.head,
            head_revision=opened.head_revision,
            events=events,
            raw_events=raw,
            event_revisions=revisions,
            stopped_at=stopped_at,
        )

    def open_stream(
        self,
        node: str,
        *,
        after: int = 0,
        until: int | None = None,
        first_page: int = EVENT_PAGE,
        revision: int = 0,
    ) -> OpenStream:
        """The head, and the events ``after + 1`` .. ``until`` (default: the end) as pages to
        read one at a time, oldest first, all at one revision (``revision``, or by default the
        first page's): the first page comes with the head, the rest are pinned to it. Memory is
        one page, whatever the stream's length.

        Pages are windows of seqs (``_windows``), never a range to the stream's end: etcd counts
        every key a range covers, so paging a long stream by open ranges would cost time in the
        square of its length.
        """
        start = after + 1
        stop = _window_end(start, min(max(first_page, 1), EVENT_PAGE), until)
        first = self.etcd.txn(
            wire.TxnRequest(
                success=[
                    self.legacy_op(node),
                    wire.get(self.keys.head(node), revision=revision),
                    wire.RequestOp(request_range=self._window(node, start, stop, revision)),
                ]
            )
        )
        legacy, head_reply, page = first.ranges()
        if legacy.count:
            raise not_migrated(self.kind.program, node, legacy.count)
        head = head_reply.kvs[0] if head_reply.kvs else None
        revision = revision or first.header.revision
        windows = self._windows(node, page.kvs, stop, until, revision)
        return OpenStream(
            head=head.value if head else None,
            head_revision=head.mod_revision if head else 0,
            revision=revision,
            pages=(self._page(node, kvs) for kvs in windows),
        )

    def _window(self, node: str, start: int, stop: int, revision: int) -> wire.RangeRequest:
        """The event keys of seqs ``start`` .. ``stop - 1``: at most that many keys to count."""
        keys = self.keys
        return wire.RangeRequest(
            key=keys.event(node, start), range_end=keys.event(node, stop), revision=revision
        )

    def _windows(
        self, node: str, kvs: list[wire.KeyValue], stop: int, until: int | None, revision: int
    ) -> Iterator[list[wire.KeyValue]]:
        """``kvs`` (the events of the window ending before seq ``stop``), then those of each
        next window of ``EVENT_PAGE`` seqs up to ``until`` (None: the stream's end), each read
        only once the one before is done with."""
        while True:
            if kvs:
                yield kvs
            elif until is None:  # the stream's end, or a gap a window wide: which?
                beyond = self.etcd.read_range(
                    wire.RangeRequest(
                        key=self.keys.event(node, stop),
                        range_end=self.keys.event_span(node)[1],
                        limit=1,
                        keys_only=True,
                        revision=revision,
                    )
                )
                if not beyond.kvs:
                    return
                stop = self.keys.seq_of(node, beyond.kvs[0].key)
            if until is not None and stop > until:
                return
            start, stop = stop, _window_end(stop, EVENT_PAGE, until)
            kvs = self.etcd.read_range(self._window(node, start, stop, revision)).kvs

    def _page(self, node: str, kvs: list[wire.KeyValue]) -> Page:
        return Page(
            events=[self.decode_event(node, kv) for kv in kvs],
            raw=[kv.value for kv in kvs],
            revisions=[kv.mod_revision for kv in kvs],
        )

    def stored_events(self, node: str) -> list[bytes]:
        """The node's events exactly as stored, oldest first, none of them decoded (so one
        that cannot be read is still there to print), read at one revision."""
        first = self.etcd.read_range(self._window(node, 1, 1 + EVENT_PAGE, 0))
        windows = self._windows(node, first.kvs, 1 + EVENT_PAGE, None, first.header.revision)
        return [kv.value for kvs in windows for kv in kvs]

    def stray_keys(self, node: str) -> list[str]:
        """Keys under the node's events prefix that are not event keys (``KeyLayout.event_span``):
        written outside the plugin. (An event key past the head's seq is read as part of the
        stream, and ``audit.check`` names the difference.)"""
        prefix = self.keys.events(node)
        start, end = self.keys.event_span(node)
        ranges = [
            wire.get(prefix, start, keys_only=True),
            wire.get(end, range_end(prefix), keys_only=True),
        ]
        reply = self.etcd.txn(wire.TxnRequest(success=ranges))
        ours = (self.keys.first(node), self.keys.swept(node))
        return [
            kv.key.decode(errors="replace")
            for found in reply.ranges()
            for kv in found.kvs
            if kv.key not in ours
        ]

    def event_at(self, node: str, seq: int) -> Event | None:
        """The event stored at ``seq`` (None: no such key)."""
        events = self.read_stream(node, after=seq - 1, until=seq).events
        return events[0] if events else None

    def decode_event(self, node: str, kv: wire.KeyValue) -> Event:
        try:
            event = self.kind.events.decode(kv.value)
        except msgspec.DecodeError as exc:
            raise StoreError(f"event {kv.key.decode()} is not readable: {exc}", node=node) from None
        if event.seq != self.keys.seq_of(node, kv.key):
            raise StoreError(
                f"event {kv.key.decode()} says it is seq {event.seq}: stored under another "
                "event's key",
                node=node,
            )
        return event


def _window_end(start: int, size: int, until: int | None) -> int:
    """Where a window of ``size`` seqs from ``start`` stops (exclusive), not past ``until``."""
    return start + size if until is None else min(start + size, until + 1)
