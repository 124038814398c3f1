"""What an observer of a whole kind reads (the exporter): where each stream starts, the events
appended in a span of seqs, and which heads disagree with their streams.

Reads only, and never a range over a whole stream: etcd counts every key a range covers, so
a stream's start is two point reads and new events are read in windows of seqs
(``ledger.store.streams``), many to a transaction, with the store's batched reads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import MAX_TXN_OPS
from resource_extend.ledger.model import verdicts
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.walk import Walk
from resource_extend.ledger.store import Store
from resource_extend.ledger.store.keys import SEQ_WIDTH
from resource_extend.ledger.store.streams import EVENT_PAGE

Span = tuple[int, int]
"""Seqs ``after + 1`` .. ``last`` of one stream."""

SEQS_PER_TXN = 2 * EVENT_PAGE
"""The most seqs one transaction's windows cover (keeps a reply far below gRPC's 4 MiB)."""


def stream_starts(store: Store[Any], ends: Mapping[str, int]) -> dict[str, int]:
    """Each named node's first seq, given its last (``ends``; 0: no stream, start 0): event 1
    if it is there, else the seq the last compaction recorded (``KeyLayout.first``), as a write
    finds it (``Store.read(with_first=True)``); two point reads a node, batched."""
    keys = store.keys
    names = [node for node, last in ends.items() if last > 0]
    per_txn = MAX_TXN_OPS // 2
    batches = [names[i : i + per_txn] for i in range(0, len(names), per_txn)]
    requests = [
        wire.TxnRequest(
            success=[
                op
                for node in batch
                for op in (
                    wire.get(keys.event(node, 1), keys_only=True),
                    wire.get(keys.first(node)),
                )
            ]
        )
        for batch in batches
    ]
    starts = {node: 0 for node, last in ends.items() if last <= 0}
    for batch, reply in zip(batches, store.etcd.read_all(requests), strict=True):
        ranges = reply.ranges()
        for i, node in enumerate(batch):
            starts[node] = store.records.start_of(
                node, ranges[2 * i], ranges[2 * i + 1], ends[node]
            )
    return starts


def appended(store: Store[Any], spans: Mapping[str, Span]) -> list[bytes]:
    """The events of each node's span, as stored, read in windows of at most ``EVENT_PAGE``
    seqs, many windows a transaction, several transactions at once. Seqs no longer there
    (compacted away meanwhile) are not; keys that are not events are left out."""
    windows = [
        (node, start, min(start + EVENT_PAGE - 1, last))
        for node, (after, last) in spans.items()
        for start in range(after + 1, last + 1, EVENT_PAGE)
    ]
    requests = [wire.TxnRequest(success=ops) for ops in _packed(store, windows)]
    stored: list[bytes] = []
    for reply in store.etcd.read_all(requests):
        for found in reply.ranges():
            stored += [kv.value for kv in found.kvs if _is_event_key(kv.key)]
    return stored


def _packed(
    store: Store[Any], windows: list[tuple[str, int, int]]
) -> Iterator[list[wire.RequestOp]]:
    """The windows' ranges, grouped into transactions of at most ``MAX_TXN_OPS`` ranges
    covering at most ``SEQS_PER_TXN`` seqs."""
    keys = store.keys
    ops: list[wire.RequestOp] = []
    covered = 0
    for node, first, last in windows:
        if ops and (len(ops) == MAX_TXN_OPS or covered + last - first + 1 > SEQS_PER_TXN):
            yield ops
            ops, covered = [], 0
        ops.append(wire.get(keys.event(node, first), keys.event(node, last + 1)))
        covered += last - first + 1
    if ops:
        yield ops


def _is_event_key(key: bytes) -> bool:
    digits = key.rpartition(b"/")[2]
    return len(digits) == SEQ_WIDTH and digits.isdigit()


def drifted(store: Store[Any], stopping: threading.Event) -> list[str] | None:
    """The nodes whose head disagrees with their stream, as ``verify --all`` judges heads (its
    checks of exports aside): every node with a head or a stream, each stream walked a page
    at a time. A node that cannot be read disagrees, as in ``verify``, unless etcd itself is
    away: then the pass raises. None when ``stopping`` ends it first."""
    found: list[str] = []
    for node in sorted(store.scans.list_nodes()):
        if stopping.is_set():
            return None
        try:
            disagrees = _disagrees(store, node)
        except PluginError:
            # etcd unreachable: status raises StoreError, and the pass proves nothing
            store.etcd.status()
            disagrees = True
        if disagrees:
            found.append(node)
    return found


def _disagrees(store: Store[Any], node: str) -> bool:
    """``verify NODE`` would say it disagrees: its head and the fold of its stream differ, or
    keys that are not events lie among its events."""
    opened = store.streams.open_stream(node)
    walk: Walk[Any] = Walk(store.kind)
    for page in opened.pages:
        walk.feed(page.events, page.raw)
    if opened.head is None:
        return bool(verdicts.judge(None, walk).problems)
    return bool(verdicts.judge(opened.head, walk).problems or store.streams.stray_keys(node))
