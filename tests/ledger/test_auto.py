"""``etcd.transport: auto`` on real etcd: in a process that serves many calls, a scan over many
nodes goes over gRPC and a request about one node over etcd's JSON gateway; in a process of its
own, everything goes over the gateway. The answers are the same either way."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from resource_extend.ledger.etcd import choice, wire
from resource_extend.ledger.etcd.connection import READERS, Connection
from resource_extend.ledger.etcd.grpc_transport import GrpcTransport
from resource_extend.ledger.etcd.transport import HttpTransport
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store.keys import range_end


@pytest.fixture
def carried(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name of the transport that carried each request, in order."""
    seen: list[str] = []
    for transport in (HttpTransport, GrpcTransport):
        real = transport.send

        def send(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            seen.append("grpc" if isinstance(self, GrpcTransport) else "http")
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(transport, "send", send)
    yield seen


def planted(url: str, count: int) -> bytes:
    root = f"/auto-{uuid.uuid4().hex}/".encode()
    etcd = Connection(EtcdConfig(machines=[url], transport="http"))
    try:
        puts = [wire.put(root + b"n%03d" % i, b"v%d" % i) for i in range(count)]
        etcd.txn(wire.TxnRequest(success=puts), write=True)
    finally:
        etcd.close()
    return root


def read_every_way(url: str, root: bytes, carried: list[str]) -> dict[str, list[str]]:
    """One point read, one paged scan, and reads in parallel; what carried each, and what
    each read."""
    etcd = Connection(EtcdConfig(machines=[url], transport="auto"))
    ways: dict[str, list[str]] = {}
    try:
        carried.clear()
        one = etcd.read_range(wire.RangeRequest(key=root + b"n000"))
        ways["point"] = [*carried, *(kv.value.decode() for kv in one.kvs)]
        carried.clear()
        scanned = list(etcd.pages(root, range_end(root), limit=3))
        ways["pages"] = [*sorted(set(carried)), *(kv.value.decode() for kv in scanned)]
        carried.clear()
        asked = [wire.TxnRequest(success=[wire.get(root + b"n%03d" % i)]) for i in range(10)]
        assert len(asked) >= 2 * READERS  # (fewer are read one by one, over the connection)
        replies = etcd.read_all(asked)
        read = [kv.value.decode() for reply in replies for r in reply.ranges() for kv in r.kvs]
        ways["in parallel"] = [*sorted(set(carried)), *read]
    finally:
        etcd.close()
    return ways


def test_auto_scans_over_grpc_and_reads_one_node_over_http_in_a_warm_process(
    etcd_endpoints: list[str], carried: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = etcd_endpoints[0]
    root = planted(url, 10)
    values = [f"v{i}" for i in range(10)]
    monkeypatch.setattr(choice, "PROCESS", choice._Process())
    alone = read_every_way(url, root, carried)
    assert alone == {"point": ["http", "v0"], "pages": ["http", *values],
                     "in parallel": ["http", *values]}  # fmt: skip
    choice.serves_many_calls()
    warm = read_every_way(url, root, carried)
    assert warm == {"point": ["http", "v0"], "pages": ["grpc", *values],
                    "in parallel": ["grpc", *values]}  # fmt: skip
