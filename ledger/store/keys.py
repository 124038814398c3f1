"""Where things live in etcd (P = ``etcd.prefix``, K = the resource kind: ``gpu``, ...).

* ``P/resource/K/<node>``: the head, where the upstream plugin keeps its node record, in its
  JSON shape plus ``seq``. Nothing else lives under ``P/resource/K/``: a prefix range there
  lists the node records, as it does with the upstream plugin.
* ``P/resource-events/K/<node>/<seq>``: one key per event, ``seq`` zero-padded so a prefix
  range returns the stream in order.
* ``P/resource/K/<node>/events/<seq>``: where release 0.1 kept the events (under the head).
  ``resource-gpu migrate`` moves them; see :mod:`ledger.store.migration`.
"""

from __future__ import annotations

from resource_extend.ledger.model.errors import StoreError

SEQ_WIDTH = 12


def range_end(prefix: bytes) -> bytes:
    """The exclusive end of the range of keys that start with ``prefix`` (etcd's prefix end)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\x00"
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


class KeyLayout:
    """The keys of one resource kind under one prefix (computed once: a many-node call names
    thousands of keys)."""

    __slots__ = ("events_root", "kind", "prefix", "root")

    def __init__(self, prefix: str, kind: str) -> None:
        self.prefix = prefix
        self.kind = kind
        base = prefix.rstrip("/")
        self.root = f"{base}/resource/{kind}/".encode()
        """The prefix of every head, and of nothing else (once 0.1 streams are migrated)."""
        self.events_root = f"{base}/resource-events/{kind}/".encode()
        """The prefix of every stream."""

    def head(self, node: str) -> bytes:
        return self.root + node.encode()

    def events(self, node: str) -> bytes:
        """The prefix of the node's event keys."""
        return self.events_root + node.encode() + b"/"

    def legacy_events(self, node: str) -> bytes:
        """The prefix of the node's event keys in release 0.1's layout (under the head)."""
        return self.head(node) + b"/events/"

    def event(self, node: str, seq: int) -> bytes:
        return self.events(node) + str(seq).zfill(SEQ_WIDTH).encode()

    def event_span(self, node: str) -> tuple[bytes, bytes]:
        """The range of the node's event keys: they are numbers, so ``<prefix>0`` up to
        ``<prefix>:`` (the byte after ``9``). A stray key under the prefix that is not a number
        (``zzz``, or the bare prefix) lies outside it: never read as an event, counted or
        deleted (``verify`` reports it)."""
        prefix = self.events(node)
        return prefix + b"0", prefix + b":"

    def first(self, node: str) -> bytes:
        """Where compaction records its checkpoint's seq, the stream's first since: a write
        learns its stream's length from it with a point read, not a range over the stream
        (etcd counts every key a range covers). Outside ``event_span``: never an event."""
        return self.events(node) + b"first"

    def swept(self, node: str) -> bytes:
        """What the orphan sweep writes before it deletes a node's ``.partial`` exports, and a
        compaction's commit compares unchanged since before it wrote its export: so a
        compaction whose export was swept can never commit. Outside ``event_span``."""
        return self.events(node) + b"swept"

    def seq_of(self, node: str, key: bytes) -> int:
        digits = key[len(self.events(node)) :]
        if not digits.isdigit():
            raise StoreError(f"{key.decode(errors='replace')!r} is not an event key", node=node)
        return int(digits)
