"""The appender: a node's changes appended as events, with compare-and-swap. One of
:class:`ledger.store.Store`'s parts (``store.appender``).

Every append follows one pattern, spelled out in :meth:`Appender.append`: read the head, decide
in memory, then one transaction

    compare: head unchanged since read  AND  the next event key is free
    then:    put the new head, put the event(s)
    else:    read the head and the stream end again (so the retry costs no extra round trip)

A transport failure after a write was sent leaves its outcome unknown; the retry first looks for
the write's operation id among the events appended since, so no change is ever applied twice
(compaction leaves events younger than ``streams.min_age`` in place, so they are there to look
in: ``ledger.upkeep.compaction``).

A write decides on the record its own call read, never on one kept from an earlier call: etcd
restored from a backup repeats revisions, and a record kept from before the restore can name
the very revision and seq of another writer's edit made after it, and pass every compare.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import Ambiguous, Connection, OutOfTime
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.audit import apply
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.digests import EMPTY, Tip, stamped, tip_of, with_tip
from resource_extend.ledger.model.errors import OutcomeUnknown, StoreError
from resource_extend.ledger.model.events import SNAPSHOT_EVERY, AnyEvent, Change, encode
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.ledger.store.migration import ON_WRITE, migrate_node, not_migrated
from resource_extend.ledger.store.outcomes import Appended, Outcomes, stream_length
from resource_extend.ledger.store.records import NodeReads, NodeRecord
from resource_extend.ledger.store.turns import turn

S = TypeVar("S", bound=msgspec.Struct)
"""The node state of the store's resource kind."""
Event = AnyEvent


class Resume(msgspec.Struct, frozen=True):
    """A write another process sent and could not see through (the resident helper died):
    its operation id, and where the stream ended when it was first sent."""

    op: str
    after: int


Admit = Callable[[int | None, int | None], None]
"""Told ``(stream length, node count)`` as read before each decision; raises to refuse."""

WriteHook = Callable[[str, int, str], None]
"""Told ``(node, stream end, op)`` just before an append first sends its write."""


class Appender(Generic[S]):
    """Appends to a kind's streams, each write as one compare-and-swap; ``by`` names who
    writes (:func:`who`)."""

    def __init__(
        self,
        config: EtcdConfig,
        kind: Kind[S],
        keys: KeyLayout,
        etcd: Connection,
        records: NodeReads[S],
        outcomes: Outcomes[S],
        *,
        by: str,
        write_hook: WriteHook | None = None,
    ) -> None:
        self.config = config
        self.kind = kind
        self.keys = keys
        self.etcd = etcd
        self.records = records
        self.outcomes = outcomes
        self.by = by
        self._write_hook = write_hook

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

        Each attempt is four steps of :class:`_Write`: find out what became of a write sent
        before (:meth:`~_Write.landed`), decide, send, and, when etcd fails, settle or give up.
        A lost race is tried again after a jittered pause for as long as the call's time
        (``etcd.timeout``) lasts: the write gives up with "contention" only once it is spent
        (or after ``etcd.max_attempts`` tries, where that is set). The writers of this host
        take turns at the node first (``ledger.store.turns``), so that they seldom race.
        """
        left = self.etcd.time_left()  # waited for at most half, leaving the write its time
        wait = max(min(left / 2, left - 3 * self.etcd.settle_reserve()), 0.0)
        with turn(self.kind.program, self.config.prefix, node, wait):
            write = _Write(
                self, node, verb, decide, with_length or admit is not None, admit, resume
            )
            return self._attempts(write)

    def _attempts(self, write: _Write[S]) -> Appended[S]:
        """``write``'s attempts, until one lands, its time is spent, or the tries run out."""
        bound = self.config.max_attempts
        for attempt in range(bound) if bound else itertools.count():
            try:
                landed = write.landed()
                if landed is not None:
                    return landed
                change = write.decided()
                if change is None:
                    return write.unchanged()
                appended = write.sent(change, first=attempt == 0)
                if appended is not None:
                    return appended
            except OutcomeUnknown:
                raise
            except StoreError as exc:
                write.failed(exc, attempt)  # raises, unless etcd is given time to settle
        raise self.outcomes.gave_up(
            write.node,
            write.verb,
            f"contention: other writers changed the node first {bound} "
            "times (etcd.max_attempts); nothing was written",
        )

    def _read_to_write(self, node: str, with_first: bool) -> NodeRecord[S]:
        return self._migrated(node, self.records.read(node, with_first=with_first), with_first)

    def _migrated(self, node: str, record: NodeRecord[S], with_first: bool) -> NodeRecord[S]:
        """``record``, or if some of its events are still in release 0.1's layout, the record
        once they are moved (a write never forks a stream between the two layouts)."""
        if not record.legacy:
            return record
        program = self.kind.program
        if record.legacy > ON_WRITE:
            raise not_migrated(program, node, record.legacy, ", too many to move within a call")
        try:
            migrate_node(self.etcd, self.keys, node)
        except OutOfTime:
            raise not_migrated(program, node, record.legacy, " and etcd.timeout ran out") from None
        return self.records.read(node, with_first=with_first)

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
            seq=seq, at=at, verb=verb, op=op or new_op(), by=self.by, change=change,
            prev=after.digest, clock=clock, snapshot=snapshot,
        )  # fmt: skip

    def repair_head(self, node: str, head_revision: int, event: Event, after: S | None) -> bool:
        """Append ``event`` and rewrite the head to ``after``, if neither moved since the head
        was read at ``head_revision``. False when they did (the caller reads again and decides
        again)."""
        txn = self.txn(node, head_revision, [event], after)
        return self.outcomes.write_once(node, txn).succeeded

    def txn(
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
        success = [
            head_op,
            *(
                wire.put(self.keys.event(node, e.seq), value)
                for e, value in zip(events, stored, strict=True)
            ),
        ]
        return wire.TxnRequest(
            compare=compare, success=success, failure=self.records.read_ops(node, with_first)
        )


class _Write(Generic[S]):
    """One append in progress: the record it decides on, and what it knows of a write it sent
    whose answer was lost."""

    def __init__(
        self,
        appender: Appender[S],
        node: str,
        verb: str,
        decide: Callable[[S | None], Change | None],
        with_length: bool,
        admit: Admit | None,
        resume: Resume | None,
    ) -> None:
        self.appender = appender
        self.node = node
        self.verb = verb
        self.decide = decide
        self.with_length = with_length
        self.admit = admit
        self.op = resume.op if resume else new_op()
        self.record = appender._read_to_write(node, with_length)
        """The record the write decides on: read in this call, never kept from another."""
        self.sent_after: int | None = resume.after if resume else None
        """Where the stream ended when the first unanswered write went out."""
        self.sent_base: NodeRecord[S] | None = None
        """The record read there (None when another process read it)."""
        self.pending: int | None = None
        """The head revision the last unanswered write compared against."""
        self.dead = False
        """That write is known never to land: it had not when last looked for, and the head
        has moved on, so its compare fails for good (never so of another process's write)."""
        self.lost = 0
        """Compare-and-swaps lost to other writers: the event records them."""
        self.settling = False
        """Given a second budget to find out what became of a sent write."""

    def landed(self) -> Appended[S] | None:
        """The result of a write sent before whose answer was lost, if it landed."""
        if self.sent_after is None:
            return None
        outcomes = self.appender.outcomes
        landed = outcomes.landed(self.node, self.op, self.sent_after, self.sent_base)
        if landed is None:
            self.dead = self.pending is not None and self.record.head_revision != self.pending
        return landed

    def decided(self) -> Change | None:
        """The change ``decide`` makes of the record as read (``admit`` asked first)."""
        record = self.record
        if self.admit is not None:
            self.admit(stream_length(record.first, record.seq, record.seq), record.nodes)
        return self.decide(record.state)

    def unchanged(self) -> Appended[S]:
        record = self.record
        length = stream_length(record.first, record.seq, record.seq)
        return Appended(
            before=record.state, after=record.state, events=[], length=length, nodes=record.nodes
        )

    def sent(self, change: Change, *, first: bool) -> Appended[S] | None:
        """Send ``change`` as one compare-and-swap: what it appended, or None when it must be
        tried again (the answer was lost, or another writer moved the node: the record is
        read again either way, the lost race's from the transaction's else branch)."""
        appender, node, record = self.appender, self.node, self.record
        tip = appender.records.tip(node, record)
        events, after = appender._events_for(record, tip, self.verb, self.op, change, self.lost)
        try:
            txn = appender.txn(
                node, record.head_revision, events, after, with_first=self.with_length
            )
            if appender._write_hook is not None and first:
                appender._write_hook(node, record.seq, self.op)
            reply = appender.etcd.txn(txn, write=True, keep=appender.etcd.settle_reserve())
        except Ambiguous:
            if self.sent_after is None:
                self.sent_after, self.sent_base = record.seq, record
            self.pending, self.dead = record.head_revision, False
            self.record = appender._read_to_write(node, self.with_length)
            return None
        if reply.succeeded:
            length = stream_length(record.first, events[0].seq, events[-1].seq)
            return Appended(
                before=record.state, after=after, events=events, length=length, nodes=record.nodes
            )
        fresh = appender._migrated(node, appender.records.record_of(node, reply), self.with_length)
        if fresh.head_revision and fresh.head_revision == record.head_revision:
            raise appender.outcomes.not_where_the_head_says(node, record.seq)  # no writer moved it
        self.record = fresh
        self.lost += 1
        pause = _jitter(min(0.002 * 2 ** (self.lost - 1), MOST_PAUSE))
        time.sleep(min(pause, appender.etcd.time_left()))
        return None

    def failed(self, exc: StoreError, attempt: int) -> None:
        """etcd failed: once, with a write sent that may yet land, read again within a second
        budget (and return, to try again); otherwise raise what the caller is told."""
        appender, node = self.appender, self.node
        unsettled = self.sent_after is not None and not self.dead
        if unsettled and not self.settling:
            self.settling = appender.etcd.extend_to_settle()
            if self.settling:  # etcd may still answer: ask once more, with time to hear it
                try:
                    self.record = appender._read_to_write(node, self.with_length)
                except StoreError:
                    pass
                else:
                    return
        if unsettled:
            raise OutcomeUnknown(
                f"write {self.op} was sent but its answer was lost, and etcd could not be "
                f"asked whether it was applied: {exc.reason}",
                node=node,
            ) from None
        if attempt and isinstance(exc, OutOfTime):
            raise appender.outcomes.gave_up(
                node,
                self.verb,
                f"contention: other writers changed the node first {attempt} times "
                f"and etcd.timeout ({appender.config.timeout:g}s) ran out",
            ) from None
        raise exc


def new_op() -> str:
    """A fresh operation id: 128 random bits in hex (as a uuid4, without importing uuid)."""
    return os.urandom(16).hex()


MOST_PAUSE = 0.05
"""Seconds a write that lost a race waits at most before it tries again: from 2 ms, doubled
at each race lost, then this; each pause drawn at random below it, so that racing writers
spread out ("full jitter")."""


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
