"""A node's record: its head, and where its stream starts and ends, in one round trip. One of
:class:`ledger.store.Store`'s parts (``store.records``).

The head's ``seq`` is where the stream ends (both are written in one transaction); where it
starts costs two point reads, whatever its length (``NodeReads.read_ops``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.model.contract import Head, Kind
from resource_extend.ledger.model.digests import EMPTY, Tip, tip_in_head, tip_of
from resource_extend.ledger.model.errors import StoreError
from resource_extend.ledger.store.keys import KeyLayout, range_end
from resource_extend.ledger.store.scans import Scans
from resource_extend.ledger.store.streams import StreamReads

S = TypeVar("S", bound=msgspec.Struct)
"""The node state of the store's resource kind."""


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
    """How many of its events are still in release 0.1's layout (``ledger.store.migration``)."""
    nodes: int | None = None
    """How many heads the kind has, this node's included (asked for with ``with_first``: a
    stream's bound is its share of the budget, ``ledger.upkeep.bounds``)."""
    found: bytes | None = None
    """The head as stored, when the upstream plugin wrote it (a write adopts it whole)."""
    tip: Tip = EMPTY
    """The stream's tip as the head carries it (EMPTY: a head written before v3, the
    upstream plugin's, or none; the write then reads the last event: ``NodeReads._tip``)."""


class NodeReads(Generic[S]):
    """Reads of one node's record for one resource kind, over ``etcd``: the head from the
    kind's record, the stream's ends by ``scans`` and its events by ``streams``."""

    def __init__(
        self,
        etcd: Connection,
        keys: KeyLayout,
        kind: Kind[S],
        scans: Scans,
        streams: StreamReads[S],
    ) -> None:
        self.etcd = etcd
        self.keys = keys
        self.kind = kind
        self.scans = scans
        self.streams = streams

    def read_ops(self, node: str, with_first: bool) -> list[wire.RequestOp]:
        """The head, a count of events in release 0.1's layout (none, once migrated: an empty
        range costs nothing), and, if asked, where the stream starts and a count of the heads.

        Where the stream starts costs two point reads, whatever its length: event 1, and the
        seq the last compaction recorded (``KeyLayout.first``). etcd counts every key a range
        covers, so a range for the first key would cost a long stream its length on every
        write; the head's ``seq`` gives the end."""
        head = wire.get(self.keys.head(node))
        ops = [head, self.streams.legacy_op(node)]
        if not with_first:
            return ops
        root = self.keys.root
        return [
            *ops,
            wire.get(self.keys.event(node, 1), keys_only=True),
            wire.get(self.keys.first(node)),
            wire.get(root, range_end(root), count_only=True),
        ]

    def record_of(self, node: str, reply: wire.TxnResponse) -> NodeRecord[S]:
        """The record from a reply to ``read_ops``. The head's ``seq`` is where the stream
        ends (both are written in one transaction, and every append compares the next key is
        free); only a node without a head of ours (removed, or the upstream plugin's) costs
        a second request to find its stream's end."""
        head_reply, legacy_reply, *extra = reply.ranges()
        nodes = extra[2].count if extra else None
        head = self._decode_head(node, head_reply.kvs[0].value) if head_reply.kvs else None
        if head is not None and head.seq is not None:
            seq = head.seq
        else:
            seq = self.scans.seq_at(
                node, self.etcd.read_range(self.scans.end_range(node, "DESCEND"))
            )  # rare
        first = self.start_of(node, extra[0], extra[1], seq) if extra else None
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

    def start_of(
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
        return self.scans.seq_at(node, self.etcd.read_range(self.scans.end_range(node, "ASCEND")))

    def tip(self, node: str, record: NodeRecord[S]) -> Tip:
        """Where the stream ends, for the next event: from the head, or else (a head written
        before v3, the upstream plugin's, or none) from the last event, read by key."""
        if record.tip.digest is not None or not record.seq:
            return record.tip
        reply = self.etcd.read_range(wire.RangeRequest(key=self.keys.event(node, record.seq)))
        if not reply.kvs:
            return EMPTY  # the stream's end is missing: verify reports it
        return tip_of(self.streams.decode_event(node, reply.kvs[0]), reply.kvs[0].value)

    def _decode_head(self, node: str, raw: bytes) -> Head[S]:
        try:
            return self.kind.read_head(raw)
        except msgspec.DecodeError as exc:
            raise StoreError(f"stored record is not readable: {exc}", node=node) from None

    def state(self, node: str) -> S | None:
        """The node's state (``None``: no record), by one point read of its record: what a
        read needs, without the stream's position that only a write does (:meth:`read`). So
        a record the upstream plugin wrote, which names no stream end, costs no second round
        trip, and etcd serves a plain range, not a transaction."""
        reply = self.etcd.read_range(wire.RangeRequest(key=self.keys.head(node)))
        return self._decode_head(node, reply.kvs[0].value).state if reply.kvs else None

    def read(self, node: str, *, with_first: bool = False) -> NodeRecord[S]:
        """The node's state and stream position, in one round trip."""
        ops = self.read_ops(node, with_first)
        return self.record_of(node, self.etcd.txn(wire.TxnRequest(success=ops)))

    def read_many(self, nodes: Iterable[str]) -> dict[str, S]:
        """The states of the named nodes that exist, as one consistent snapshot."""
        raw = self.scans.raw_heads(nodes)
        return {node: self._decode_head(node, head).state for node, head in raw.items()}
