"""Reads that span many nodes: heads by the thousand, node listings, stream bounds.

The heads' prefix holds nothing but heads, so a paged range over it reads every node record at
one revision with no key to send; point reads win when a call names only a small share of the
nodes there. One of :class:`ledger.store.Store`'s parts (``store.scans``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Literal

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import MAX_TXN_OPS, READERS, Connection
from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.ledger.model.names import check_node_name
from resource_extend.ledger.store.keys import SEQ_WIDTH, KeyLayout, range_end

SCAN_PAGE = 5000
"""Heads per range request when scanning the prefix (well below gRPC's 4 MiB a reply)."""

PARALLEL_SCAN = 2000
"""From this many names on, the heads are scanned in ``READERS`` slices at once."""

Found = tuple[bytes, bytes, bytes]
"""A key under the heads' prefix: ``(its node segment, rest of the key, value)``."""

SCAN_WHEN = 4
"""Read the named heads by scanning every head when there are at most this many per name."""

KEY_PAGE = 1000
"""Keys per keys-only range request when listing nodes."""

STORED_PAGE = 1000
"""Events per range request when reading a part of a stream as stored."""


class NodeKeys(msgspec.Struct, frozen=True):
    """What etcd holds for a node: a head, a stream, or both (``legacy``: events in release
    0.1's layout, not yet migrated)."""

    head: bool = False
    stream: bool = False
    legacy: bool = False


class StreamBounds(msgspec.Struct, frozen=True):
    count: int
    first: int
    last: int
    tail: bytes | None = None
    """The last event as stored, when asked for (``stream_bounds``' ``tails``)."""


class Scans:
    """Many-node reads over ``etcd``; ``keys`` is the layout of the kind read."""

    def __init__(self, etcd: Connection, keys: KeyLayout) -> None:
        self.etcd = etcd
        self.keys = keys
        self.foreign: set[bytes] = set()
        """Keys met under the kind's prefixes whose node segment names no node (not UTF-8, or
        no name ``check_node_name`` takes, such as one with a terminal escape): the plugins
        never write one, so none is read as a node; the commands that list nodes report them
        (each as its key up to the segment), quoted."""

    def _node_named(self, root: bytes, segment: bytes) -> str | None:
        """The node a key's first segment under ``root`` names, or None: a foreign key."""
        try:
            return check_node_name(segment.decode())
        except (UnicodeDecodeError, InvalidRequest):
            self.foreign.add(root + segment)
            return None

    def _end_ops(self, node: str, *, tail: bool = False) -> list[wire.RequestOp]:
        """Ranges for the first and the last event key of the node's stream (``tail``: the
        last event's value too, at no extra cost to etcd).

        The last costs a scan of the whole stream (etcd sorts a descending range before it
        applies the limit), so writes take the stream's end from the head instead.
        """
        last = self.end_range(node, "DESCEND", keys_only=not tail)
        return [self._first_op(node), wire.RequestOp(request_range=last)]

    def _first_op(self, node: str) -> wire.RequestOp:
        return self._end_op(node, "ASCEND")

    def _end_op(self, node: str, order: Literal["ASCEND", "DESCEND"]) -> wire.RequestOp:
        return wire.RequestOp(request_range=self.end_range(node, order))

    def end_range(
        self,
        node: str,
        order: Literal["ASCEND", "DESCEND"],
        *,
        keys_only: bool = True,
        revision: int = 0,
    ) -> wire.RangeRequest:
        start, end = self.keys.event_span(node)
        return wire.RangeRequest(
            key=start,
            range_end=end,
            limit=1,
            keys_only=keys_only,
            sort_order=order,
            revision=revision,
        )

    def seq_at(self, node: str, reply: wire.RangeResponse) -> int:
        return self.keys.seq_of(node, reply.kvs[0].key) if reply.kvs else 0

    def raw_heads(self, nodes: Iterable[str]) -> dict[str, bytes]:
        """The stored heads of the named nodes that have one, as one consistent snapshot.

        Many names: a count of the heads fixes the revision every read is pinned to. When the
        prefix holds at most ``SCAN_WHEN`` heads per name asked for, paged ranges over the
        heads (a range reads each head once, with no key to send), in ``READERS`` slices of
        the key space read at once for thousands of names. Otherwise point reads in
        transactions of at most ``MAX_TXN_OPS`` ranges, several in flight at once.
        """
        names = list(dict.fromkeys(nodes))
        if len(names) <= MAX_TXN_OPS:
            return self._point_heads(names)
        root, end = self.keys.root, range_end(self.keys.root)
        probe = self.etcd.read_range(wire.RangeRequest(key=root, range_end=end, count_only=True))
        revision = probe.header.revision
        if probe.count > SCAN_WHEN * len(names):
            return self._point_heads(names, revision)
        slices = READERS if len(names) >= PARALLEL_SCAN else 1
        keys = sorted(self.keys.head(name) for name in names)
        cuts = [root, *(keys[len(keys) * i // slices] for i in range(1, slices)), end]

        def read(start: bytes, stop: bytes) -> Callable[[Connection], list[Found]]:
            return lambda reader: list(self._scan(reader, start, stop, revision))

        reads = [read(cuts[i], cuts[i + 1]) for i in range(slices) if cuts[i] < cuts[i + 1]]
        found = self.etcd.in_parallel(reads) if len(reads) > 1 else [reads[0](self.etcd)]
        wanted = {name.encode(): name for name in names}  # (a foreign segment is never one)
        return {
            wanted[segment]: value
            for part in found
            for segment, rest, value in part
            if not rest and segment in wanted
        }

    def _point_heads(self, names: list[str], revision: int = 0) -> dict[str, bytes]:
        batches = [names[i : i + MAX_TXN_OPS] for i in range(0, len(names), MAX_TXN_OPS)]
        if not batches:
            return {}

        def request(batch: list[str], revision: int = 0) -> wire.TxnRequest:
            ops = [wire.get(self.keys.head(node), revision=revision) for node in batch]
            return wire.TxnRequest(success=ops)

        first = self.etcd.txn(request(batches[0], revision))
        revision = revision or first.header.revision  # (the header has etcd's current one)
        replies = [first, *self.etcd.read_all([request(b, revision) for b in batches[1:]])]
        heads: dict[str, bytes] = {}
        for batch, reply in zip(batches, replies, strict=True):
            for node, found in zip(batch, reply.ranges(), strict=True):
                if found.kvs:
                    heads[node] = found.kvs[0].value
        return heads

    def _scan(
        self, reader: Connection, start: bytes, end: bytes, revision: int = 0
    ) -> Iterator[Found]:
        """``(node segment, rest of the key, value)`` of every key from ``start`` to ``end``
        under the heads' prefix, page by page, at ``revision`` (0: the first page's). ``rest``
        is empty for a head; anything else is an event in release 0.1's layout. The segment
        is left as bytes: a read of named nodes compares it with their keys, and only a
        listing asks whether it names a node (``_node_named``), off core's path."""
        root = self.keys.root
        for kv in reader.pages(start, end, limit=SCAN_PAGE, revision=revision):
            segment, _, rest = kv.key[len(root) :].partition(b"/")
            yield segment, rest, kv.value

    def all_heads(self) -> tuple[dict[str, bytes], set[str]]:
        """Every head under the prefix, by node, in one paged range at one revision; and the
        nodes with events still in release 0.1's layout."""
        heads: dict[str, bytes] = {}
        legacy: set[str] = set()
        root = self.keys.root
        for segment, rest, value in self._scan(self.etcd, root, range_end(root)):
            if (name := self._node_named(root, segment)) is None:
                continue
            if rest:
                legacy.add(name)
            else:
                heads[name] = value
        return heads, legacy

    def list_nodes(self) -> dict[str, NodeKeys]:
        """Every node with a head or a stream, by name."""
        return self.survey()[0]

    def survey(self) -> tuple[dict[str, NodeKeys], dict[str, bytes]]:
        """Every node with a head or a stream, and every head: one paged range over the heads
        (``all_heads``) and a paged keys-only one over the streams, where the rest of a stream
        is skipped as soon as its first key shows up (a long stream costs one extra request,
        not a page per thousand events)."""
        heads, legacy = self.all_heads()
        found = {name: NodeKeys(head=True) for name in heads}
        for name in legacy:
            found[name] = NodeKeys(head=name in heads, stream=True, legacy=True)
        for name, _ in self.names_under(self.keys.events_root):
            seen = found.get(name, NodeKeys())
            found[name] = NodeKeys(head=seen.head, stream=True, legacy=seen.legacy)
        return found, heads

    def names_under(self, root: bytes) -> Iterable[tuple[str, bytes]]:
        """``(node, rest of the key)`` for the keys under ``root``; of the keys below a node
        (``<node>/...``) only the first. A segment that names no node (never one the plugins
        wrote) is recorded in :attr:`foreign`, not yielded."""
        start, end = root, range_end(root)
        previous = None
        while True:
            reply = self.etcd.read_range(
                wire.RangeRequest(key=start, range_end=end, limit=KEY_PAGE, keys_only=True)
            )
            for kv in reply.kvs:
                segment, _, rest = kv.key[len(root) :].partition(b"/")
                if rest:
                    if segment == previous:
                        continue
                    previous = segment
                if (name := self._node_named(root, segment)) is not None:
                    yield name, rest
            if not reply.more:
                return
            last = reply.kvs[-1].key
            node, slash, _ = last[len(root) :].partition(b"/")
            start = range_end(root + node + b"/") if slash else last + b"\x00"

    def stream_bounds(
        self, nodes: Iterable[str], *, tails: Collection[str] = ()
    ) -> dict[str, StreamBounds]:
        """Each named node's stream length and first and last positions, in batched reads;
        for the nodes in ``tails`` also the last event as stored (``StreamBounds.tail``), read
        by the same range that finds the last position."""
        names = list(dict.fromkeys(nodes))
        per_txn = MAX_TXN_OPS // 3
        requests = []
        for i in range(0, len(names), per_txn):
            ops = []
            for node in names[i : i + per_txn]:
                start, end = self.keys.event_span(node)
                length = wire.get(start, end, count_only=True)
                ops += [length, *self._end_ops(node, tail=node in tails)]
            requests.append(wire.TxnRequest(success=ops))
        bounds: dict[str, StreamBounds] = {}
        for i, reply in enumerate(self.etcd.read_all(requests)):
            ranges = reply.ranges()
            for j, node in enumerate(names[i * per_txn : (i + 1) * per_txn]):
                count, first, last = ranges[3 * j : 3 * j + 3]
                bounds[node] = StreamBounds(
                    count=count.count,
                    first=self.seq_at(node, first),
                    last=self.seq_at(node, last),
                    tail=last.kvs[0].value if node in tails and last.kvs else None,
                )
        return bounds

    def stored_between(self, node: str, first: int, last: int) -> dict[int, bytes]:
        """The node's events ``first`` .. ``last`` as stored, by the seq their keys name, read
        in pages at one revision; a key there that names no seq (a stray key) is left out."""
        prefix = self.keys.events(node)
        end = self.keys.event(node, last + 1)
        stored: dict[int, bytes] = {}
        for kv in self.etcd.pages(self.keys.event(node, first), end, limit=STORED_PAGE):
            digits = kv.key[len(prefix) :]
            if len(digits) == SEQ_WIDTH and digits.isdigit():
                stored[int(digits)] = kv.value
        return stored

    # -- writes -------------------------------------------------------------------------------
