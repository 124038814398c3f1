"""How much of etcd one kind's keys take (heads and streams, by node) and how full etcd is.

Read with plain ranges, page by page, never a transaction: an etcd whose NOSPACE alarm is
raised, where an operator needs these figures most, still answers ranges.
"""

from __future__ import annotations

import msgspec

from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.store.keys import KeyLayout, range_end

PAGE = 1000
"""Keys per range request (events are small: a page stays well under a reply's limit)."""


class StreamSize(msgspec.Struct, frozen=True):
    node: str
    events: int
    bytes: int
    """Its keys and values: what the live stream holds, before etcd's own overhead."""


class KindFootprint(msgspec.Struct, frozen=True, kw_only=True):
    """One kind's keys under one prefix, with the largest streams first."""

    kind: str
    prefix: str
    nodes: int
    head_keys: int
    head_bytes: int
    event_keys: int
    event_bytes: int
    largest: list[StreamSize]


class EtcdFootprint(msgspec.Struct, frozen=True, kw_only=True):
    """The answering member's database: the file (what the quota limits) and what is in use."""

    member: str
    version: str
    db_size: int
    db_size_in_use: int | None
    """None where the transport's messages do not carry it (gRPC, see ``wire``)."""
    alarms: list[str]


def sizes_under(conn: Connection, root: bytes) -> dict[str, tuple[int, int]]:
    """``{node: (keys, bytes)}`` for the keys ``<root><node>[/...]``, read at one revision."""
    sizes: dict[str, tuple[int, int]] = {}
    for kv in conn.pages(root, range_end(root), limit=PAGE):
        name = kv.key[len(root) :].partition(b"/")[0].decode(errors="replace")
        keys, size = sizes.get(name, (0, 0))
        sizes[name] = (keys + 1, size + len(kv.key) + len(kv.value))
    return sizes


def measure(conn: Connection, keys: KeyLayout, top: int = 10) -> KindFootprint:
    """The kind's heads and streams under ``keys``' prefix, with its ``top`` largest streams."""
    heads = sizes_under(conn, keys.root)
    streams = sizes_under(conn, keys.events_root)
    largest = sorted(streams.items(), key=lambda item: (-item[1][1], item[0]))[:top]
    return KindFootprint(
        kind=keys.kind,
        prefix=keys.prefix,
        nodes=len(heads.keys() | streams.keys()),
        head_keys=sum(count for count, _ in heads.values()),
        head_bytes=sum(size for _, size in heads.values()),
        event_keys=sum(count for count, _ in streams.values()),
        event_bytes=sum(size for _, size in streams.values()),
        largest=[StreamSize(node, count, size) for node, (count, size) in largest],
    )


def etcd_footprint(conn: Connection) -> EtcdFootprint:
    member, status = conn.status()
    return EtcdFootprint(
        member=member,
        version=status.version,
        db_size=status.db_size,
        db_size_in_use=status.db_size_in_use,
        alarms=conn.alarms(),
    )
