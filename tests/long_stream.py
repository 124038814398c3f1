"""A long GPU stream written straight into etcd, as the plugin would have written it event by
event (chained, snapshotted, times a millisecond apart), but in batches: a stream of 1,000,000
events in minutes, for ``tests/audit/test_long_streams.py`` and ``scripts/bench --long``.

Event 1 adds a node of ``CARDS`` cards; then each event takes a card or gives one back, so the
usage after event ``seq`` is ``usage_after(seq)``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.model.digests import EMPTY, tip_of, with_tip
from resource_extend.ledger.model.events import Change, encode
from resource_extend.ledger.store import Store
from resource_extend.projections.changes import NodeAdded, UsageChanged
from resource_extend.projections.gpu.node import NodeState

PRODUCT = "nvidia-3090"
CARDS = 8
BATCH = 100
"""Puts per transaction (etcd allows 128 by default)."""
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def usage_after(seq: int) -> int:
    """Cards in use after event ``seq``: event 2 takes one, event 3 gives it back, ..."""
    return 1 - seq % 2 if seq > 1 else 0


def at(seq: int) -> datetime:
    """When event ``seq`` was written: a millisecond after the one before."""
    return START + timedelta(milliseconds=seq)


def grow(store: Store[NodeState], node: str, length: int) -> None:
    """Write ``node``'s head and its events 1..``length``, ``BATCH`` events a transaction.

    A long job of many requests: each transaction gets a new time budget of its own, not a share
    of one call's (a busy machine took over 5 s for 12,000 events)."""
    state: NodeState | None = None
    tip = EMPTY
    ops: list[wire.RequestOp] = []
    for seq in range(1, length + 1):
        if seq == 1:
            change: Change = NodeAdded(capacity={PRODUCT: CARDS})
        else:
            change = UsageChanged(delta={PRODUCT: 1 if seq % 2 == 0 else -1})
        state = NodeState(capacity={PRODUCT: CARDS}, usage={PRODUCT: usage_after(seq)})
        event = store.appender.new_event(
            seq, "set-node-resource-usage", change, after=tip, state=state
        )
        event.at = at(seq)
        stored = encode(event)
        tip = tip_of(event, stored)
        ops.append(wire.put(store.keys.event(node, seq), stored))
        if len(ops) == BATCH:
            store.etcd.renew()
            store.etcd.txn(wire.TxnRequest(success=ops), write=True)
            ops = []
    assert state is not None
    head = with_tip(store.kind.write_head(state, length), tip)
    store.etcd.renew()
    store.etcd.txn(
        wire.TxnRequest(success=[*ops, wire.put(store.keys.head(node), head)]), write=True
    )
