"""What a read asks of etcd for one node (``NodeReads.state``): its record, by one point read,
whoever wrote it; only a write's read (``NodeReads.read``) finds where the node's stream ends,
which for a record the upstream plugin wrote takes a second request. Against the in-memory etcd
(``tests.unit.memory_etcd``), counting the requests it answers."""

from __future__ import annotations

import pytest

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.transport import Reply, Request
from resource_extend.ledger.model.errors import StoreError
from resource_extend.projections.gpu.events import GpuRecord, encode
from resource_extend.projections.gpu.resources import Resource
from tests.unit.memory_etcd import MemoryEtcd
from tests.unit.test_append_branches import CARD, NODE, make_store, new_node, usage


class Counted(MemoryEtcd):
    """The in-memory etcd, keeping each request it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Request] = []

    def send(self, endpoint: int, request: Request, reply: type[Reply], timeout: float) -> Reply:
        self.sent.append(request)
        return super().send(endpoint, request, reply, timeout)


def upstream_record(etcd: MemoryEtcd, used: int) -> None:
    """``NODE``'s record as the upstream plugin writes it: no stream, no stream end."""
    record = GpuRecord(capacity=Resource.of({CARD: 8}), usage=Resource.of({CARD: used}))
    etcd.put(make_store(etcd).keys.head(NODE), encode(record))


def test_a_node_this_plugin_wrote_is_read_by_one_point_read() -> None:
    etcd = Counted()
    new_node(etcd)
    etcd.sent.clear()
    assert usage(make_store(etcd).records.state(NODE)) == {}
    assert etcd.sent == [wire.RangeRequest(key=make_store(etcd).keys.head(NODE))]


def test_a_node_the_upstream_plugin_wrote_is_read_by_one_point_read_too() -> None:
    etcd = Counted()
    upstream_record(etcd, used=2)
    assert usage(make_store(etcd).records.state(NODE)) == {CARD: 2}
    assert etcd.sent == [wire.RangeRequest(key=make_store(etcd).keys.head(NODE))]
    etcd.sent.clear()
    record = make_store(etcd).records.read(NODE)  # a write's read: where the stream ends
    assert (usage(record.state), record.upstream, len(etcd.sent)) == ({CARD: 2}, True, 2)


def test_a_node_without_a_record_reads_as_none_in_one_request() -> None:
    etcd = Counted()
    assert make_store(etcd).records.state(NODE) is None
    assert len(etcd.sent) == 1


def test_a_record_that_cannot_be_read_is_a_store_error_naming_the_node() -> None:
    etcd = Counted()
    etcd.put(make_store(etcd).keys.head(NODE), b"{not json")
    with pytest.raises(StoreError, match="stored record is not readable") as raised:
        make_store(etcd).records.state(NODE)
    assert raised.value.node == NODE
