"""The record each node was left in by this process's own last write to it, so that its next
write decides on that record rather than read it first: one round trip instead of two when
nobody else has written the node since. Kept only in a process that asks for it
(:func:`keep_recent_writes`: the resident helper's call processes, which serve call after
call), and for ``KEEP`` seconds. A record is decided on only while the node's turn on this host
(``ledger.store.turns``) still bears the mark its write left there: once another writer of this
host has written the node, the record is read first, as without one, rather than sent to lose
a compare (which costs etcd a proposal of its own: a write transaction goes through consensus
whether its compare holds or not).

Nothing is trusted that a compare-and-swap does not check (``ledger.store.appender``):

- a write decided on a kept record is sent under the usual compare (the head unchanged since,
  the next key free), and lands only if nobody wrote the node since;
- a compare lost on a kept record is no race: the node's record comes back in the
  transaction's else branch, and the write decides again on it at once;
- any outcome but a change sent (``decide`` refusing the request, finding nothing to do, or
  the stream's bound refusing the write) is decided again on the record read afresh;
- a write whose answer is lost forgets the node's record.

What the compare does not cover, where the stream starts and how many nodes the kind has (what
a stream's bound is reckoned from), is at most ``KEEP`` seconds old, and only ever errs one
way for where the stream starts (a compaction since moves it on: the stream looks longer).
"""

from __future__ import annotations

import time
from typing import Any

from resource_extend.ledger.etcd.kept import Kept
from resource_extend.ledger.store.records import NodeRecord

KEEP = 2.0
"""Seconds a node's record, as this process's last write left it, is decided on by the next."""

Where = tuple[tuple[str, ...], bytes]
"""A node's record by its cluster (``etcd.machines``) and its head's key."""


class RecentWrites:
    """Each node's record as this process's last write to it left it, when it wrote it."""

    def __init__(self) -> None:
        self.on = False
        """Whether this process keeps them (:func:`keep_recent_writes`)."""
        self._kept: Kept[Where, tuple[float, NodeRecord[Any]]] = Kept()

    def keep(self, where: Where, record: NodeRecord[Any]) -> None:
        if self.on:
            self._kept.keep(where, (time.monotonic(), record))

    def take(self, where: Where) -> NodeRecord[Any] | None:
        """The node's record as this process's last write left it, if that was lately."""
        kept = self._kept.get(where)
        if kept is None or time.monotonic() - kept[0] > KEEP:
            return None
        return kept[1]

    def forget(self, where: Where) -> None:
        self._kept.forget(where)


RECENT = RecentWrites()


def keep_recent_writes() -> None:
    """This process serves call after call: it keeps the records its writes leave (said by the
    resident helper before it forks its call processes)."""
    RECENT.on = True
