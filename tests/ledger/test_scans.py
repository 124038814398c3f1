"""Many-node reads in ranges: the heads under ``<prefix>/resource/gpu/`` are read with paged
ranges pinned to one revision when that is cheaper than point reads, and ``nodes`` reads every
head in one paged range, with no request per node. In-process, against the real etcd, counting
the requests the store sends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store import Store, scans
from resource_extend.projections.gpu.node import GPU, NodeState
from tests.audit.helpers import G, added, event, head, plant
from tests.etcdkv import Etcd, upstream_head
from tests.plugin import TRANSPORT, Plugin

pytestmark = pytest.mark.grpc

NODES = 600


def name(i: int) -> str:
    return f"node-{i:04d}"


class Counted:
    """The requests a store's own connection sends (its parallel readers' aside):
    ``("range", key)`` or ``("txn", ranges in it)``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: Store[Any]) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.after: dict[int, Any] = {}
        """Run ``after[n]()`` once the n-th request has been answered."""
        send = store.etcd._send

        def counting(request: Any, reply: Any, **options: Any) -> Any:
            answer = send(request, reply, **options)
            if isinstance(request, wire.RangeRequest):
                self.sent.append(("range", request.key))
            else:
                self.sent.append(("txn", len(request.success)))
            if len(self.sent) in self.after:
                self.after.pop(len(self.sent))()
            return answer

        monkeypatch.setattr(store.etcd, "_send", counting)

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.sent]


@pytest.fixture
def fleet(plugin: Plugin, etcd: Etcd) -> Iterator[Store[NodeState]]:
    """600 upstream records; 3 of them with streams; one stream in 0.1's layout."""
    etcd.put_many(
        {
            etcd.head_key(name(i)): json.dumps(upstream_head({G: 2 + i % 5}, {G: i % 2})).encode()
            for i in range(NODES)
        }
    )
    for i in (1, 2, 3):
        plant(etcd, name(i), [event(1, added({G: 3}))], head({G: 3}, {}, 1))
    plant(etcd, "old", [event(1, added({G: 1}))], head({G: 1}, {}, 1), legacy=True)
    settings = EtcdConfig(machines=plugin.endpoints, prefix=plugin.prefix, transport=TRANSPORT)
    store = Store(settings, GPU)
    try:
        yield store
    finally:
        store.close()


def expected(i: int) -> NodeState:
    if i in (1, 2, 3):
        return NodeState(capacity={G: 3})
    return NodeState(capacity={G: 2 + i % 5}, usage={G: 1} if i % 2 else {})


def test_most_of_the_prefix_is_read_in_paged_ranges_at_one_revision(
    fleet: Store[NodeState], etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scans, "SCAN_PAGE", 100)
    counted = Counted(monkeypatch, fleet)
    # A write lands between the second and third pages: the read must not see it.
    late = name(550)
    counted.after[3] = lambda: etcd.put_many({etcd.head_key(late): b'{"capacity": null}'})
    names = [name(i) for i in range(NODES)] + ["unknown"]
    states = fleet.records.read_many(names)
    assert states == {name(i): expected(i) for i in range(NODES)}
    # A count fixes the revision; then 602 keys (the 0.1 event among them), 100 a page.
    assert counted.kinds() == ["range"] * 8
    assert fleet.records.read_many([late]) == {late: NodeState()}  # the write did land


def test_thousands_of_names_are_read_in_slices_at_once_at_one_revision(
    fleet: Store[NodeState], etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scans, "SCAN_PAGE", 50)
    monkeypatch.setattr(scans, "PARALLEL_SCAN", 100)
    counted = Counted(monkeypatch, fleet)  # counts this connection's requests, not the readers'
    late = [name(10), name(590)]  # in the first slice and in the last
    counted.after[1] = lambda: etcd.put_many({etcd.head_key(n): b"{}" for n in late})
    names = [name(i) for i in range(NODES)]
    assert fleet.records.read_many(names) == {name(i): expected(i) for i in range(NODES)}
    assert counted.sent == [("range", fleet.keys.root)]  # the count; the slices went elsewhere
    assert fleet.records.read_many(late) == {n: NodeState() for n in late}


def test_a_small_share_of_the_prefix_is_read_key_by_key_at_one_revision(
    fleet: Store[NodeState], etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch, fleet)
    # A write lands after the count that fixes the revision: no batch may see it.
    late = name(596)  # in the second batch
    counted.after[1] = lambda: etcd.put_many({etcd.head_key(late): b"{}"})
    names = [name(i) for i in range(0, NODES, 4)]  # 150 of 600: a range would read 4x too much
    assert fleet.records.read_many(names) == {name(i): expected(i) for i in range(0, NODES, 4)}
    assert counted.sent == [("range", fleet.keys.root), ("txn", 128), ("txn", 22)]
    assert fleet.records.read_many([late]) == {late: NodeState()}  # the write did land


def test_nodes_reads_every_head_in_one_paged_range_and_no_request_per_node(
    fleet: Store[NodeState], monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch, fleet)
    known, heads = fleet.scans.survey()
    assert counted.sent == [("range", fleet.keys.root), ("range", fleet.keys.events_root)]
    assert len(heads) == NODES + 1 and "old" in heads
    assert {n for n, keys in known.items() if keys.stream} == {name(1), name(2), name(3), "old"}
    assert [n for n, keys in known.items() if keys.legacy] == ["old"]
    for i in range(NODES):
        assert GPU.read_head(heads[name(i)]).state == expected(i)
