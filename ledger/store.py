"""The etcd store: what the plugin reads and writes in etcd, and how (``ledger.transport``
carries the requests).

Writes follow one pattern, spelled out in :meth:`Store.append`: read the head, decide in memory,
then one transaction

    compare: head unchanged since read  AND  the next event key is free
    then:    put the new head, put the event(s)
    else:    read the head and the stream end again (so the retry costs no extra round trip)

A transport failure after a write was sent leaves its outcome unknown; the retry first looks for
the write's operation id among the events appended since, so no change is ever applied twice
(compaction leaves events younger than ``streams.min_age`` in place, so they are there to look
in: ``ledger.compaction``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger import migration, tallies, wire
from resource_extend.ledger.audit import apply, fold
from resource_extend.ledger.config import EtcdConfig
from resource_extend.ledger.connection import Ambiguous, OutOfTime
from resource_extend.ledger.digests import (
    EMPTY,
    Tip,
    stamped,
    tip_in_head,
    tip_of,
    with_tip,
)
from resource_extend.ledger.errors import Contention, OutcomeUnknown, StoreError
from resource_extend.ledger.events import SNAPSHOT_EVERY, AnyEvent, Change, Checkpoint, encode
from resource_extend.ledger.keys import KeyLayout, range_end
from resource_extend.ledger.kinds import Head, Kind
from resource_extend.ledger.migration import not_migrated
from resource_extend.ledger.streams import Stream, StreamReads
from resource_extend.ledger.transport import Transport

S = TypeVar("S", bound=msgspec.Struct)
"""The node state of the store's resource kind."""
Event = AnyEvent


class NodeRecord(msgspec.Struct, Generic[S], frozen=True):
    """What one read of a node returns: its state and where its stream and head stand."""

    state: S | None
    seq: int
    """The last event's position (0 for an empty stream)."""
    first: int | None
    """The first event's position (0 for an empty stream; a checkpoint's after compaction);
    None when not asked for (``read(with_first=True)``)."""
    head_revision: int
    """The head's ``mod_revision`` (0 when there is no head)."""
    upstream: bool
    """The head was written by the upstream plugin (it has no ``seq``): adopt it on write."""
    legacy: int = 0
    """How many of its events are still in release 0.1's layout (``ledger.migration``)."""
    nodes: int | None = None
    """How many heads the kind has, this node's included (asked for with ``with_first``: a
    stream's bound is its share of the budget, ``ledger.bounds``)."""
    found: bytes | None = None
    """The head as stored, when the upstream plugin wrote it (a write adopts it whole)."""
    tip: Tip = EMPTY
    """The stream's tip as the head carries it (EMPTY: a head written before v3, the
    upstream plugin's, or none; the write then reads the last event: ``Store._tip``)."""


class Appended(msgspec.Struct, Generic[S], frozen=True):
    before: S | None
    after: S | None
    events: list[Event]
    """Empty when the request changed nothing."""
    length: int | None
    """How many events the stream holds after this append (None unless asked for)."""
    nodes: int | None = None
    """How many heads the kind had when this append last read (None unless asked for)."""


class Resume(msgspec.Struct, frozen=True):
    """A write another process sent and could not see through (the resident helper died):
    its operation id, and where the stream ended when it was first sent."""

    op: str
    after: int


Admit = Callable[[int | None, int | None], None]
"""Told ``(stream length, node count)`` as read before each decision; raises to refuse."""

WriteHook = Callable[[str, int, str], None]
"""Told ``(node, stream end, op)`` just before an append first sends its write."""


class Store(StreamReads[S]):
    """One plugin call's connection to etcd for one resource kind, bounded in time by
    ``config.timeout``."""

    def __init__(
        self,
        config: EtcdConfig,
        kind: Kind[S],
        transport: Transport | None = None,
        *,
        deadline: float | None = None,
        write_hook: WriteHook | None = None,
        by: str | None = None,
    ) -> None:
        super().__init__(config, transport, deadline=deadline)
        self.kind = kind
        self._write_hook = write_hook
        self._by = by or who()
        self.keys = KeyLayout(config.prefix, kind.name)

    def _read_ops(self, node: str, with_first: bool) -> list[wire.RequestOp]:
        """The head, a count of events in release 0.1's layout (none, once migrated: an empty
        range costs nothing), and, if asked, where the stream starts and a count of the heads.

        Where the stream starts costs two point reads, whatever its length: event 1, and the
        seq the last compaction recorded (``KeyLayout.first``). etcd counts every key a range
        covers, so a range for the first key would cost a long stream its length on every
        write; the head's ``seq`` gives the end."""
        head = wire.get(self.keys.head(node))
        ops = [head, self._legacy_op(node)]
        if not with_first:
            return ops
        root = self.keys.root
        return [
            *ops,
            wire.get(self.keys.event(node, 1), keys_only=True),
            wire.get(self.keys.first(node)),
            wire.get(root, range_end(root), count_only=True),
        ]

    def _record(self, node: str, reply: wire.TxnResponse) -> NodeRecord[S]:
        """The record from a reply to ``_read_ops``. The head's ``seq`` is where the stream
        ends (both are written in one transaction, and every append compares the next key is
        free); only a node without a head of ours (removed, or the upstream plugin's) costs
        a second request to find its stream's end."""
        head_reply, legacy_reply, *extra = reply.ranges()
        nodes = extra[2].count if extra else None
        head = self._decode_head(node, head_reply.kvs[0].value) if head_reply.kvs else None
        if head is not None and head.seq is not None:
            seq = head.seq
        else:
            seq = self._seq_at(node, self._range(self._end_range(node, "DESCEND")))  # rare
        first = self._first(node, extra[0], extra[1], seq) if extra else None
        legacy = legacy_reply.count
        if head is None:
            return NodeRecord(
                state=None,
                seq=seq,
                first=first,
                head_revision=0,
                upstream=False,
                legacy=legacy,
                nodes=nodes,
            )
        return NodeRecord(
            state=head.state,
            seq=seq,
            first=first,
            head_revision=head_reply.kvs[0].mod_revision,
            upstream=head.seq is None,
            legacy=legacy,
            nodes=nodes,
            found=head_reply.kvs[0].value if head.seq is None else None,
            tip=tip_in_head(head_reply.kvs[0].value) if head.seq else EMPTY,
        )

    def _first(
        self, node: str, one: wire.RangeResponse, recorded: wire.RangeResponse, seq: int
    ) -> int:
        """Where the stream starts: event 1 if it is there, else the seq the last compaction
        recorded, else (a stream compacted by an older release) its first key, by a range
        that costs etcd the stream's length, once. A recorded seq is a bound, not a promise
        (an older release's compaction leaves it behind): compaction checks it
        (``first_key``)."""
        if one.kvs:
            return 1
        value = recorded.kvs[0].value if recorded.kvs else b""
        if value.isdigit() and 0 < int(value) <= seq:
            return int(value)
        return self.first_key(node) if seq else 0

    def first_key(self, node: str) -> int:
        """The stream's first seq (0: none), by a range over it: what compaction trusts."""
        return self._seq_at(node, self._range(self._end_range(node, "ASCEND")))

    def _tip(self, node: str, record: NodeRecord[S]) -> Tip:
        """Where the stream ends, for the next event: from the head, or else (a head written
        before v3, the upstream plugin's, or none) from the last event, read by key."""
        if record.tip.digest is not None or not record.seq:
            return record.tip
        reply = self._range(wire.RangeRequest(key=self.keys.event(node, record.seq)))
        if not reply.kvs:
            return EMPTY  # the stream's end is missing: verify reports it
        return tip_of(self._decode_event(node, reply.kvs[0]), reply.kvs[0].value)

    def _decode_head(self, node: str, raw: bytes) -> Head[S]:
        try:
            return self.kind.read_head(raw)
        except msgspec.DecodeError as exc:
            raise StoreError(f"stored record is not readable: {exc}", node=node) from None

    def read(self, node: str, *, with_first: bool = False) -> NodeRecord[S]:
        """The node's state and stream position, in one round trip."""
        ops = self._read_ops(node, with_first)
        return self._record(node, self._txn(wire.TxnRequest(success=ops)))

    def read_many(self, nodes: Iterable[str]) -> dict[str, S]:
        """The states of the named nodes that exist, as one consistent snapshot."""
        raw = self.raw_heads(nodes)
        return {node: self._decode_head(node, head).state for node, head in raw.items()}

    def append(
        self,
        node: str,
        verb: str,
        decide: Callable[[S | None], Change | None],
        *,
        with_length: bool = False,
        admit: Admit | None = None,
        resume: Resume | None = None,
    ) -> Appended[S]:
        """Decide on the node's current state and append the change, with compare-and-swap.

        ``decide`` is pure; it may raise (nothing is written) or return ``None`` (nothing to
        append). It is called again on the fresh state after every lost race. ``with_length``
        also reports the stream's length and the kind's node count, as does ``admit``, which is told
        them before each decision and may refuse the write by raising. ``resume`` finishes a
        write another process sent and could not see through: if it landed, its result.
        """
        op = resume.op if resume else new_op()
        with_length = with_length or admit is not None
        record = self._read_to_write(node, with_length)
        # Where the stream ended when the first unanswered write went out, and the record read
        # there (None when another process read it).
        sent_after: int | None = resume.after if resume else None
        sent_base: NodeRecord[S] | None = None
        lost = 0  # compare-and-swaps lost to other writers: the event records them
        for attempt in range(self._config.max_attempts):
            try:
                if sent_after is not None:
                    landed = self._landed(node, op, sent_after, sent_base)
                    if landed is not None:
                        return landed
                if admit is not None:
                    admit(_length(record.first, record.seq, record.seq), record.nodes)
                change = decide(record.state)
                if change is None:
                    return Appended(
                        before=record.state,
                        after=record.state,
                        events=[],
                        length=_length(record.first, record.seq, record.seq),
                        nodes=record.nodes,
                    )
                tip = self._tip(node, record)
                events, after = self._events_for(record, tip, verb, op, change, lost)
                try:
                    txn = self._append_txn(
                        node, record.head_revision, events, after, with_first=with_length
                    )
                    if self._write_hook is not None and attempt == 0:
                        self._write_hook(node, record.seq, op)
                    reply = self._txn(txn, write=True)
                except Ambiguous:
                    if sent_after is None:
                        sent_after, sent_base = record.seq, record
                    record = self._read_to_write(node, with_length)
                    continue
                if reply.succeeded:
                    return Appended(
                        before=record.state,
                        after=after,
                        events=events,
                        length=_length(record.first, events[0].seq, events[-1].seq),
                        nodes=record.nodes,
                    )
                fresh = self._migrated(node, self._record(node, reply), with_length)
                if fresh.head_revision and fresh.head_revision == record.head_revision:
                    raise self._not_where_the_head_says(node, record.seq)  # no writer moved it
                record = fresh
                lost += 1
                time.sleep(_jitter(min(0.002 * 2**attempt, 0.05)))
            except OutcomeUnknown:
                raise
            except StoreError as exc:
                if sent_after is not None:
                    raise OutcomeUnknown(
                        f"write {op} was sent but its answer was lost, and etcd could not be "
                        f"asked whether it was applied: {exc.reason}",
                        node=node,
                    ) from None
                if attempt and isinstance(exc, OutOfTime):
                    raise self._gave_up(
                        node,
                        verb,
                        f"contention: other writers changed the node first {attempt} times "
                        f"and etcd.timeout ({self._config.timeout:g}s) ran out",
                    ) from None
                raise
        raise self._gave_up(
            node,
            verb,
            f"contention: other writers changed the node first {self._config.max_attempts} "
            "times (etcd.max_attempts); nothing was written",
        )

    def _gave_up(self, node: str, verb: str, reason: str) -> Contention:
        """The write's Contention, counted first where exporters see it (``ledger.tallies``)."""
        at = datetime.now(timezone.utc)
        failure = tallies.Failure(node=node, at=at, by=self._by, reason=reason)
        self._deadline = max(self._deadline, time.monotonic() + tallies.GRACE)
        # What the caller must hear is the failure itself, counted or not.
        with contextlib.suppress(StoreError):
            self._write_once(node, tallies.record(self.keys.prefix, self.kind.name, verb, failure))
        return Contention(reason, node=node)

    def write_failures(self) -> dict[str, int]:
        """How many writes of this kind gave up, by verb (``ledger.tallies``)."""
        reply = self._range(tallies.read(self.keys.prefix, self.kind.name))
        return tallies.counts(self.keys.prefix, self.kind.name, reply.kvs)

    def _not_where_the_head_says(self, node: str, seq: int) -> StoreError:
        """Why an append failed though no writer moved the head: a key squats the next seq, or
        the stream does not reach the head's seq (appending there would leave a gap for good).
        Either was written outside the plugin."""
        squatter = self._range(wire.RangeRequest(key=self.keys.event(node, seq + 1))).kvs
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

    def _read_to_write(self, node: str, with_first: bool) -> NodeRecord[S]:
        return self._migrated(node, self.read(node, with_first=with_first), with_first)

    def _migrated(self, node: str, record: NodeRecord[S], with_first: bool) -> NodeRecord[S]:
        """``record``, or if some of its events are still in release 0.1's layout, the record
        once they are moved (a write never forks a stream between the two layouts)."""
        if not record.legacy:
            return record
        program = self.kind.program
        if record.legacy > migration.ON_WRITE:
            raise not_migrated(program, node, record.legacy, ", too many to move within a call")
        try:
            migration.migrate_node(self, self.keys, node)
        except OutOfTime:
            raise not_migrated(program, node, record.legacy, " and etcd.timeout ran out") from None
        return self.read(node, with_first=with_first)

    def _landed(
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
        stream = self.events(node, after=after if base is not None else 0)
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
            length=_length(first, ours[0].seq, ours[-1].seq),
        )

    def _events_for(
        self, record: NodeRecord[S], tip: Tip, verb: str, op: str, change: Change, lost: int
    ) -> tuple[list[Event], S | None]:
        """The events that append ``change`` (after an adoption, for an upstream head), and
        the state after them; ``change``'s records the ``lost`` compare-and-swaps before it."""
        changes: list[Change] = [change]
        if record.upstream and record.state is not None and record.found is not None:
            changes.insert(0, self.kind.adopted(record.state, record.found))
        events: list[Event] = []
        state = record.state
        for i, each in enumerate(changes, start=1):
            if events:  # the event before names it (an adoption's, only)
                tip = tip_of(events[-1], encode(events[-1]))
            state = apply(self.kind, state, each)
            events.append(self.new_event(record.seq + i, verb, each, op, after=tip, state=state))
        if lost:
            events[-1].retries = lost
        return events, state

    def new_event(
        self,
        seq: int,
        verb: str,
        change: Change,
        op: str | None = None,
        *,
        after: Tip = EMPTY,
        state: S | None = None,
    ) -> Event:
        """An event of this call, following ``after`` (the stream's tip): it names the event
        before it, and its time is never before that one's. ``state`` is the node's after it,
        snapshotted on every ``SNAPSHOT_EVERY``-th seq."""
        at, clock = stamped(datetime.now(timezone.utc), after)
        snapshot: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
        if state is not None and seq % SNAPSHOT_EVERY == 0:
            snapshot = msgspec.Raw(self.kind.write_head(state, seq))
        return Event(
            seq=seq, at=at, verb=verb, op=op or new_op(), by=self._by, change=change,
            prev=after.digest, clock=clock, snapshot=snapshot,
        )  # fmt: skip

    def repair_head(self, node: str, head_revision: int, event: Event, after: S | None) -> bool:
        """Append ``event`` and rewrite the head to ``after``, if neither moved since the head
        was read at ``head_revision``. False when they did (the caller reads again and decides
        again)."""
        txn = self._append_txn(node, head_revision, [event], after)
        return self._write_once(node, txn).succeeded

    def replace_with_checkpoint(self, node: str, checkpoint: Event, replaced: Stream) -> bool:
        """Put ``checkpoint`` in place of the event at its seq and delete every event before it;
        ``replaced`` is the stream from its first event to that one, as read. False when
        another compaction came first.

            compare: the stream's first event and the event at the checkpoint's seq are
                     unchanged since ``replaced`` was read
            then:    put the checkpoint, delete the events from the first to it, and
                     record its seq as the stream's first (``KeyLayout.first``)
            else:    nothing

        Every compaction deletes or rewrites the stream's first key, so of two compactions
        that read the same first event only one commits, whatever seq each cuts at: no event
        lands in two exports, and no checkpoint is deleted by a compaction that never saw it.
        Appends touch neither key, so they never conflict. Two operations whatever the
        stream's length. An answer lost on the way raises ``OutcomeUnknown``.
        """
        first, last = replaced.events[0], replaced.events[-1]
        assert last.seq == checkpoint.seq, (last.seq, checkpoint.seq)
        key = self.keys.event(node, checkpoint.seq)
        first_key = self.keys.event(node, first.seq)
        txn = wire.TxnRequest(
            compare=[
                wire.unchanged_since(first_key, replaced.event_revisions[0]),
                wire.unchanged_since(key, replaced.event_revisions[-1]),
            ],
            success=[
                wire.put(key, encode(checkpoint)),
                wire.delete(first_key, range_end=key),
                wire.put(self.keys.first(node), str(checkpoint.seq).encode()),
            ],
        )
        return self._write_once(node, txn).succeeded

    def _write_once(self, node: str, txn: wire.TxnRequest) -> wire.TxnResponse:
        try:
            return self._txn(txn, write=True)
        except Ambiguous as exc:
            raise OutcomeUnknown(
                f"the write was sent but its answer was lost ({exc}); read the node again to "
                "see whether it was applied",
                node=node,
            ) from None

    def _append_txn(
        self,
        node: str,
        head_revision: int,
        events: list[Event],
        after: S | None,
        *,
        with_first: bool = False,
    ) -> wire.TxnRequest:
        head_key = self.keys.head(node)
        stored = [encode(event) for event in events]  # each encoded once, on the hot path
        if after is None:
            head_op = wire.delete(head_key)
        else:
            last = events[-1]
            head = self.kind.write_head(after, last.seq)
            head_op = wire.put(head_key, with_tip(head, tip_of(last, stored[-1])))
        compare = [
            wire.unchanged_since(head_key, head_revision),
            wire.unchanged_since(self.keys.event(node, events[0].seq), 0),  # next key free
        ]
        if events[0].seq > 1:  # and the stream reaches the seq before it: no gap left behind
            compare.append(wire.exists(self.keys.event(node, events[0].seq - 1)))
        return wire.TxnRequest(
            compare=compare,
            success=[
                head_op,
                *(
                    wire.put(self.keys.event(node, e.seq), value)
                    for e, value in zip(events, stored, strict=True)
                ),
            ],
            failure=self._read_ops(node, with_first),
        )


def new_op() -> str:
    """A fresh operation id: 128 random bits in hex (as a uuid4, without importing uuid)."""
    return os.urandom(16).hex()


def _jitter(most: float) -> float:
    """A pause of up to ``most`` seconds, so that racing writers retry apart (``random`` is
    not worth its import to a call)."""
    return most * int.from_bytes(os.urandom(2), "big") / 0xFFFF


@functools.cache
def who(uid: int | None = None) -> str:
    """``user@host`` for the events a caller appends: the account the system knows ``uid`` (by
    default this process's) by, never a name from the environment, which the caller sets."""
    import pwd

    uid = os.getuid() if uid is None else uid
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = f"uid{uid}"
    return f"{user}@{os.uname().nodename}"  # the host name, without the socket module


def _length(first: int | None, new_first: int, last: int) -> int | None:
    """Events from the stream's first (``new_first`` when it was empty) to ``last``."""
    if first is None:
        return None
    return last - (first or new_first) + 1 if last else 0
