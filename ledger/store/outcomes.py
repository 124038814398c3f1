"""What became of a write: what an append returns, whether a write whose answer was lost
landed after all, and why one gave up (counted where exporters see it, ``ledger.store.tallies``).
One of :class:`ledger.store.Store`'s parts (``store.outcomes``).
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import Ambiguous, Connection
from resource_extend.ledger.model.audit import fold
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.errors import Contention, OutcomeUnknown, StoreError
from resource_extend.ledger.model.events import AnyEvent, Checkpoint
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.ledger.store.records import NodeRecord
from resource_extend.ledger.store.streams import StreamReads
from resource_extend.ledger.store.tallies import GRACE, Failure, counts
from resource_extend.ledger.store.tallies import read as read_tallies
from resource_extend.ledger.store.tallies import record as record_failure

S = TypeVar("S", bound=msgspec.Struct)
"""The node state of the store's resource kind."""
Event = AnyEvent


class Appended(msgspec.Struct, Generic[S], frozen=True):
    """What an append did: the node's state before and after, and the events it appended."""

    before: S | None
    after: S | None
    events: list[Event]
    """Empty when the request changed nothing."""
    length: int | None
    """How many events the stream holds after this append (None unless asked for)."""
    nodes: int | None = None
    """How many heads the kind had when this append last read (None unless asked for)."""


class Outcomes(Generic[S]):
    """A write's outcome over ``etcd``, found (in the stream, by ``streams``) or explained;
    ``by`` names who writes (``ledger.store.appender.who``)."""

    def __init__(
        self, etcd: Connection, keys: KeyLayout, kind: Kind[S], streams: StreamReads[S], by: str
    ) -> None:
        self.etcd = etcd
        self.keys = keys
        self.kind = kind
        self.streams = streams
        self.by = by

    def gave_up(self, node: str, verb: str, reason: str) -> Contention:
        """The write's Contention, counted first where exporters see it
        (``ledger.store.tallies``)."""
        at = datetime.now(timezone.utc)
        failure = Failure(node=node, at=at, by=self.by, reason=reason)
        self.etcd.extend(GRACE)
        # What the caller must hear is the failure itself, counted or not.
        with contextlib.suppress(StoreError):
            self.write_once(node, record_failure(self.keys.prefix, self.kind.name, verb, failure))
        return Contention(reason, node=node)

    def write_failures(self) -> dict[str, int]:
        """How many writes of this kind gave up, by verb (``ledger.store.tallies``)."""
        reply = self.etcd.read_range(read_tallies(self.keys.prefix, self.kind.name))
        return counts(self.keys.prefix, self.kind.name, reply.kvs)

    def not_where_the_head_says(self, node: str, seq: int) -> StoreError:
        """Why an append failed though no writer moved the head: a key squats the next seq, or
        the stream does not reach the head's seq (appending there would leave a gap for good).
        Either was written outside the plugin."""
        squatter = self.etcd.read_range(wire.RangeRequest(key=self.keys.event(node, seq + 1))).kvs
        found = (
            f"event {seq + 1} already exists"
            if squatter
            else f"event {seq}, the last, is missing from the stream"
        )
        return StoreError(
            f"{found}, though the head says the stream ends at {seq}: written outside the "
            f"plugin ('{self.kind.program} verify {node}' shows it); nothing was written",
            node=node,
        )

    def landed(
        self, node: str, op: str, after: int, base: NodeRecord[S] | None
    ) -> Appended[S] | None:
        """If operation ``op`` was applied after position ``after``, what it did.

        ``base`` is the record read at ``after``; without it (resuming another process's
        write) the state before is folded from the start of the stream.

        Compaction leaves events younger than ``streams.min_age`` in place, so the events
        appended since ``after`` are all still there to look in. Should a checkpoint stand in
        for some of them all the same, the write may have landed and been compacted away: that
        is an unknown outcome, never a failure.
        """
        stream = self.streams.events(node, after=after if base is not None else 0)
        ours = [event for event in stream if event.op == op]
        if not ours:
            if any(isinstance(e.change, Checkpoint) and e.seq > after for e in stream):
                raise OutcomeUnknown(
                    f"write {op} was sent but its answer was lost, and the events appended "
                    "since were compacted before they could be searched for it: it may have "
                    "landed and been compacted away (by a compaction run with a --min-age "
                    "shorter than a call, or on a host whose clock is ahead by more than "
                    f"streams.min_age); the export the checkpoint names ({self.kind.program} "
                    "history) holds the answer",
                    node=node,
                )
            return None
        earlier = (event for event in stream if event.seq < ours[0].seq)
        before = fold(self.kind, earlier, base.state if base is not None else None)
        first = base.first if base is not None else stream[0].seq
        return Appended(
            before=before,
            after=fold(self.kind, ours, before),
            events=ours,
            length=stream_length(first, ours[0].seq, ours[-1].seq),
        )

    def write_once(self, node: str, txn: wire.TxnRequest) -> wire.TxnResponse:
        try:
            return self.etcd.txn(txn, write=True)
        except Ambiguous as exc:
            raise OutcomeUnknown(
                f"the write was sent but its answer was lost ({exc}); read the node again to "
                "see whether it was applied",
                node=node,
            ) from None


def stream_length(first: int | None, new_first: int, last: int) -> int | None:
    """Events from the stream's first (``new_first`` when it was empty) to ``last``."""
    if first is None:
        return None
    return last - (first or new_first) + 1 if last else 0
