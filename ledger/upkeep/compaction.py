"""Compaction: bound a stream by replacing its older events with one checkpoint.

What it promises: every event it removes from etcd is in exactly one export file, and a
checkpoint references that file; an export file that no checkpoint references exists only as
an unpublished temporary (``<name>.partial``). How:

1. Choose the cut: the newest ``keep`` events stay, and so does every event younger than
   ``min_age`` seconds and everything after it (by this process's clock against each event's
   time; a checkpoint's is the last event it replaced; a time far ahead of this clock is not
   believed, and such an event goes only with an older one after it: ``audit.believed_at``).
   Both are judged once, as the call begins (``_Horizon``): what is written or comes of age
   while it runs waits for the next compaction, so a call ends under a steady write load.
   A call whose answer was lost looks for its own event among the recent ones
   (``Store._landed``): they must outlive it.
2. Export the events to go under a temporary name, flushed to disk (``ledger.upkeep.export``), the
   node's sweep mark read first (``Checkpoints.swept_at``).
3. One transaction (``Checkpoints.replace_with_checkpoint``): if the stream's first event and the
   event at the cut are as read, and no orphan sweep has marked the node since, put the
   checkpoint at the cut and delete the events before it. Two compactions that read the same
   first event cannot both commit, and one paused past its export's grace, whose export a
   sweep may have deleted, cannot commit at all (``ledger.upkeep.orphans``).
4. Won: publish the export (rename it to its final name). Lost to another compaction: delete
   the temporary and start again. Answer lost: read the cut back and settle by the
   checkpoint's operation id; if etcd cannot say, the temporary stays, and ``verify --repair``
   publishes it once a checkpoint is found naming it.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from resource_extend.ledger.host.config import Destination
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.digests import named_by_next
from resource_extend.ledger.model.errors import Contention, OutcomeUnknown, PluginError, StoreError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.store import Store
from resource_extend.ledger.store.appender import new_op
from resource_extend.ledger.store.streams import Stream
from resource_extend.ledger.upkeep import export, orphans

ATTEMPTS = 5
"""Compactions race only with compactions (appends never touch the keys they replace)."""

STEP = 5000
"""The most events one step of a compaction replaces: a step reads, exports and deletes at
most this many, so it finishes well within one call's time whatever the stream's length, and
what it did stays done. A longer cut is made in steps, each its own checkpoint and export."""


class Compacted(msgspec.Struct, frozen=True):
    """A compaction that took place: ``checkpoint`` replaced events ``first`` .. its seq, in
    ``steps`` steps (as many exports, each the next in the chain)."""

    first: int
    checkpoint: Event
    steps: int = 1


def compact(
    store: Store[Any],
    node: str,
    *,
    keep: int,
    to: Destination,
    min_age: float,
    at_least: int = 1,
    verb: str = "compact",
    steps: int | None = None,
) -> Compacted | None:
    """Keep the ``keep`` newest events and every event younger than ``min_age`` seconds (and
    all after it); replace all older ones by a checkpoint, their export written ``to`` a
    directory (``Destination``: the archive's files are named ``archive:<file>``).

    None when that would shorten the stream by fewer than ``at_least`` (at least 1) events
    (auto-compaction waits for a tenth of the bound, rather than export a file per write as
    events come of age one by one). Reads the stream only as far as the cut: while young
    events block it, one page of ``at_least + 1`` events (so auto-compaction, retried after
    every write, stays cheap).

    A cut of more than ``STEP`` events is made in steps, each its own checkpoint and export;
    ``steps`` bounds how many this call makes (None: as many as it takes). A write's
    compaction makes one, and the next write goes on from its checkpoint.
    """
    at_least = max(at_least, 1)  # so every compaction deletes the stream's first key
    horizon = _Horizon(datetime.now(timezone.utc), keep)
    done: Compacted | None = None
    while steps is None or done is None or done.steps < steps:
        step = _step(store, node, horizon, to=to, min_age=min_age, at_least=at_least, verb=verb)
        if step is None:
            break
        if done is not None:
            step = msgspec.structs.replace(step, first=done.first, steps=done.steps + 1)
        done = step
    return done


class _Horizon:
    """How far one compaction call may cut, judged as it begins: events old enough at ``now``,
    and none of the ``keep`` newest of the stream as it first read it (``last``). A call cutting
    in steps while writers go on would otherwise chase the events that come of age meanwhile,
    and end only when the writers stop."""

    def __init__(self, now: datetime, keep: int) -> None:
        self.now = now
        self.keep = keep
        self.last: int | None = None

    def through(self, seq: int) -> int:
        """The last event the cut may take, the stream's newest being ``seq`` now."""
        if self.last is None:
            self.last = seq - self.keep
        return min(self.last, seq - self.keep)


def _step(
    store: Store[Any],
    node: str,
    horizon: _Horizon,
    *,
    to: Destination,
    min_age: float,
    at_least: int,
    verb: str,
) -> Compacted | None:
    """One step: at most ``STEP`` events replaced (``_to_cut``), retried on a lost race (or
    a first seq recorded by a compaction before an older release's)."""
    for attempt in range(ATTEMPTS):
        try:
            stream = _to_cut(
                store, node, horizon, min_age=min_age, at_least=at_least, exact=attempt > 0
            )
            if stream is None:
                return None
            return _replace(store, node, stream, to, verb)
        except _Raced:
            continue
    raise Contention(f"contention: other compactions of this node won {ATTEMPTS} times", node=node)


class _Raced(Exception):
    """Another compaction of the node committed first: read again and start over."""


def _to_cut(
    store: Store[Any],
    node: str,
    horizon: _Horizon,
    *,
    min_age: float,
    at_least: int,
    exact: bool,
) -> Stream | None:
    """The events to replace, from the stream's first to the cut, read at one revision (None:
    too few). ``exact``: find the first key by a range, rather than take the recorded first."""
    record = store.records.read(node, with_first=True)
    assert record.first is not None
    first = store.records.first_key(node) if exact else record.first
    through = min(horizon.through(record.seq), first + STEP - 1)
    if through - first < at_least:
        return None
    now = horizon.now
    stream = store.streams.read_stream(
        node,
        after=first - 1,
        until=through,
        stop=lambda event: audit.too_young(event, now=now, min_age=min_age),
        first_page=at_least + 1,
    )
    if stream.stopped_at is not None:
        through = stream.stopped_at - 1
    if unvouched := audit.unvouched(stream.events, now=now, min_age=min_age):
        through = stream.events[-unvouched].seq - 1  # stamped ahead, and nothing after them
        stream = _shortened(stream, len(stream.events) - unvouched)
    if through - first < at_least:
        return None
    if not stream.events or stream.events[0].seq != first:
        raise _Raced  # the first event is gone since the stream's first key was read
    if first != 1 and not isinstance(stream.events[0].change, Checkpoint) and not exact:
        raise _Raced  # not where a stream starts: the recorded first is off; find the key
    if stream.events[-1].seq != through:
        raise PluginError(
            f"cannot compact: event {through} is missing from the stream "
            f"(see: {store.kind.program} verify {node})",
            node=node,
        )
    return stream


def _shortened(stream: Stream, length: int) -> Stream:
    """``stream`` with its first ``length`` events only."""
    return msgspec.structs.replace(
        stream,
        events=stream.events[:length],
        raw_events=stream.raw_events[:length],
        event_revisions=stream.event_revisions[:length],
        stopped_at=stream.events[length].seq,
    )


def _replace(store: Store[Any], node: str, stream: Stream, to: Destination, verb: str) -> Compacted:
    """Export ``stream.events``, then replace them by a checkpoint (``_Raced`` when another
    compaction came first: the temporary export is gone again)."""
    change = audit.checkpoint_for(
        store.kind, stream.events, export=""
    )  # refuses a stream with gaps
    op = new_op()
    swept_at = store.checkpoints.swept_at(
        node
    )  # before the export exists: a sweep of it comes after
    written = time.monotonic()
    path, file_digest = export.write_partial(
        to.directory, node, stream.raw_events, stream.events, op, create=to.create
    )
    tip = named_by_next(stream.events[-1], stream.raw_events[-1])  # what the next event names
    change = msgspec.structs.replace(
        change,
        export=export.location(path, archive=to.archive),
        tip=tip,
        export_digest=file_digest,
    )
    checkpoint = store.appender.new_event(stream.events[-1].seq, verb, change, op)
    if time.monotonic() - written > orphans.GRACE / 2:  # another compaction may sweep it now
        export.discard(path)
        raise PluginError("the export took too long to write; nothing was compacted", node=node)
    try:
        won = store.checkpoints.replace_with_checkpoint(node, checkpoint, stream, swept_at=swept_at)
    except OutcomeUnknown:
        won = _settle(store, node, checkpoint, path)
    except StoreError:
        export.discard(path)  # etcd refused it, or it was never sent
        raise
    if not won:  # another compaction came first, or a sweep took this export for an orphan
        export.discard(path)
        raise _Raced
    export.publish(path, node, store.kind.program)
    _sweep(store, node, to.directory)
    return Compacted(first=change.first, checkpoint=checkpoint)


def _sweep(store: Store[Any], node: str, directory: str) -> None:
    """Delete the node's orphaned exports in ``directory`` (``ledger.upkeep.orphans``):
    housekeeping, which never fails the compaction that has committed."""
    with contextlib.suppress(PluginError, OSError):
        orphans.sweep(store, node, orphans.find_in(store.scans, directory, node))


def _settle(store: Store[Any], node: str, checkpoint: Event, path: Path) -> bool:
    """Whether the compaction whose answer was lost committed: the event at the cut is its
    checkpoint (same operation id). Anything else there means it did not; nothing there (a
    later compaction removed it already) or no answer leaves it unknown, and the temporary
    export in place for ``verify --repair``."""

    def unknown(why: str) -> OutcomeUnknown:
        return OutcomeUnknown(
            f"compaction {checkpoint.op} was sent but its answer was lost, and {why}; its "
            f"export stays unpublished as {str(export.partial_of(path))!r}, which "
            f"'{store.kind.program} verify {node} --repair' publishes if a checkpoint names it",
            node=node,
        )

    try:
        found = store.streams.event_at(node, checkpoint.seq)
    except StoreError as exc:
        raise unknown(f"etcd could not be asked whether it was applied: {exc.reason}") from None
    if found is None:
        raise unknown(f"a later compaction has already replaced event {checkpoint.seq}")
    return found.op == checkpoint.op
