"""Compaction's writes: the checkpoint that replaces a stream's older events, and the sweep mark
that keeps an orphan sweep and a compaction from both acting on one export. One of
:class:`ledger.store.Store`'s parts (``store.checkpoints``); ``ledger.upkeep.compaction`` says
when and why they are written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.model.events import AnyEvent, encode
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.ledger.store.outcomes import Outcomes
from resource_extend.ledger.store.streams import Stream

S = TypeVar("S", bound=msgspec.Struct)
Event = AnyEvent


class Checkpoints(Generic[S]):
    """Each write one transaction, sent once (``Outcomes.write_once``)."""

    def __init__(
        self, etcd: Connection, keys: KeyLayout, outcomes: Outcomes[S], *, by: str
    ) -> None:
        self.etcd = etcd
        self.keys = keys
        self.outcomes = outcomes
        self.by = by

    def swept_at(self, node: str) -> int:
        """The revision at which an orphan sweep last marked the node (``KeyLayout.swept``; 0:
        never). A compaction reads it before it writes its export."""
        reply = self.etcd.txn(
            wire.TxnRequest(success=[wire.get(self.keys.swept(node), keys_only=True)])
        )
        kvs = reply.ranges()[0].kvs
        return kvs[0].mod_revision if kvs else 0

    def mark_swept(self, node: str, firsts: Iterable[int]) -> bool:
        """Mark the node swept, unless a compaction has committed past any of ``firsts`` (the
        first seqs of the exports about to be deleted: each compaction deletes its first event).

            compare: every event in ``firsts`` is still there
            then:    put the sweep's mark (``KeyLayout.swept``)
            else:    nothing (False): an export may be a committed compaction's; keep it

        Once it is done, no compaction that read the mark before can commit; an answer lost on
        the way raises ``OutcomeUnknown`` (and nothing is to be deleted)."""
        txn = wire.TxnRequest(
            compare=[wire.exists(self.keys.event(node, seq)) for seq in sorted(set(firsts))],
            success=[wire.put(self.keys.swept(node), self.by.encode())],
        )
        return self.outcomes.write_once(node, txn).succeeded

    def replace_with_checkpoint(
        self, node: str, checkpoint: Event, replaced: Stream, *, swept_at: int
    ) -> bool:
        """Put ``checkpoint`` in place of the event at its seq and delete every event before it;
        ``replaced`` is the stream from its first event to that one, as read, and ``swept_at``
        the node's sweep mark as read before the export was written. False when another
        compaction came first, or a sweep since (which may have deleted the export).

            compare: the stream's first event and the event at the checkpoint's seq are
                     unchanged since ``replaced`` was read, and the sweep's mark since
                     ``swept_at``
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
                wire.unchanged_since(self.keys.swept(node), swept_at),
            ],
            success=[
                wire.put(key, encode(checkpoint)),
                wire.delete(first_key, range_end=key),
                wire.put(self.keys.first(node), str(checkpoint.seq).encode()),
            ],
        )
        return self.outcomes.write_once(node, txn).succeeded
