"""Moving streams from release 0.1's layout (events under the head,
``P/resource/K/<node>/events/<seq>``) to their own prefix (``P/resource-events/K/<node>/<seq>``).

One transaction moves up to :data:`BATCH` events, the oldest first:

    compare: the batch's first and last old keys unchanged since read  AND  no new key at
             the first one's place
    then:    put each event, byte for byte, at its new key; delete the batch's old keys

So every event is, at every moment, in exactly one of the two places: a migration killed at any
point loses and duplicates nothing, and the next run carries on from where it stopped. A batch
whose answer was lost is simply read again (the compare makes the move safe to repeat). Appends
never conflict with a move: they write the head and the next event key, which a move leaves
alone. Until its stream is moved a node is written only by migrating it first
(``Appender.append``), and its stream is read by nobody (``StreamReads.read_stream``
refuses).
"""

from __future__ import annotations

from collections.abc import Callable

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import MAX_TXN_OPS, Ambiguous, Connection
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.store.keys import KeyLayout, range_end
from resource_extend.ledger.store.scans import Scans

BATCH = MAX_TXN_OPS - 1
"""Events per transaction: a put each, and one range delete."""

ON_WRITE = 4 * BATCH
"""The most events a write migrates before it appends (a few transactions, well within a call's
time budget); a longer 0.1 stream makes the write fail, asking for ``migrate``."""


def legacy_nodes(scans: Scans) -> list[str]:
    """The nodes with events still in 0.1's layout (keys below a head), by name: one paged
    keys-only range over the heads' prefix, which skips the rest of each old stream."""
    return [name for name, rest in scans.names_under(scans.keys.root) if rest]


def move_batch(conn: Connection, keys: KeyLayout, node: str) -> int:
    """Move the node's oldest 0.1 events (up to :data:`BATCH`) in one transaction; how many
    were moved (0: none are left; a move that lost a race or its answer moves 0 and is tried
    again by the caller)."""
    old = keys.legacy_events(node)
    page = conn.read_range(wire.RangeRequest(key=old, range_end=range_end(old), limit=BATCH))
    if not page.kvs:
        return 0
    first, last = page.kvs[0], page.kvs[-1]

    def new(kv: wire.KeyValue) -> bytes:
        return keys.events(node) + kv.key[len(old) :]

    txn = wire.TxnRequest(
        compare=[
            wire.unchanged_since(first.key, first.mod_revision),
            wire.unchanged_since(last.key, last.mod_revision),
            wire.unchanged_since(new(first), 0),
        ],
        success=[
            *(wire.put(new(kv), kv.value) for kv in page.kvs),
            wire.delete(first.key, last.key + b"\x00"),
        ],
        failure=[wire.get(first.key, keys_only=True), wire.get(new(first), keys_only=True)],
    )
    try:
        reply = conn.txn(txn, write=True)
    except Ambiguous:
        return 0  # read again: either it moved, or the compare still holds
    if reply.succeeded:
        return len(page.kvs)
    still_old, already_new = reply.ranges()
    if still_old.kvs and already_new.kvs:
        raise PluginError(
            f"cannot migrate: event {first.key[len(old) :].decode()} is in both layouts "
            f"({first.key.decode()} and {new(first).decode()}); compare the two and delete "
            "the wrong one",
            node=node,
        )
    return 0


def migrate_node(
    conn: Connection,
    keys: KeyLayout,
    node: str,
    *,
    attempts: int = 5,
    before_batch: Callable[[], None] | None = None,
) -> int:
    """Move all of the node's 0.1 events; how many were moved. ``before_batch`` runs before
    each transaction (the ``migrate`` command renews the time budget there)."""
    moved = idle = 0
    while idle < attempts:
        if before_batch is not None:
            before_batch()
        count = move_batch(conn, keys, node)
        if count == 0 and not legacy_count(conn, keys, node):
            return moved
        moved += count
        idle = 0 if count else idle + 1
    raise PluginError(
        f"cannot migrate: the stream's 0.1 events kept changing ({attempts} tries)", node=node
    )


def legacy_count(conn: Connection, keys: KeyLayout, node: str) -> int:
    """How many of the node's events are in 0.1's layout."""
    old = keys.legacy_events(node)
    request = wire.RangeRequest(key=old, range_end=range_end(old), count_only=True)
    return conn.read_range(request).count


def not_migrated(program: str, node: str, count: int, why: str = "") -> PluginError:
    """The error of a call that meets a stream still in 0.1's layout."""
    return PluginError(
        f"{count} events of this node are still in release 0.1's layout{why}: run "
        f"'{program} migrate' (docs/upgrading.md: Upgrading from 0.1)",
        node=node,
    )
