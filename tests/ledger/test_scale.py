"""Reads over a pod of 1500 nodes in one call each (upstream broke past etcd's 128 ops per txn).

The nodes are written straight into etcd as the upstream Go plugin writes them (no ``seq``, no
events), 128 keys per transaction; reading them must neither fail nor adopt (write) anything.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from tests.etcdkv import Etcd, no_write, upstream_head
from tests.plugin import Plugin, R, counts

pytestmark = pytest.mark.grpc

NODES = 1500
G = "nvidia-3090"
A = "nvidia-a100.80g"  # a dot: statsd keys must replace it
UNBOUNDED = 1_000_000
Cards = dict[str, int]


def name(i: int) -> str:
    return f"gpu-{i:04d}.rack{i % 4}"


def node_cards(i: int) -> tuple[Cards, Cards]:
    """Capacity and usage of node i: varied, some full, some idle, some without cards."""
    if i % 97 == 50:
        return {}, {}
    capacity = {G: 2 + i % 7}
    usage = {G: 1 + i % 2}
    if i % 5 == 0:
        capacity[A] = 1 + i % 3
        if i % 10 == 0:
            usage[A] = 1
    if i in (700, 1234):
        usage = {}
    return capacity, usage


def ratio(part: int, whole: int) -> Fraction:
    return Fraction(part, whole) if whole > 0 else Fraction(0)


class Pod:
    def __init__(self, plugin: Plugin, etcd: Etcd) -> None:
        self.plugin = plugin
        self.etcd = etcd
        self.names = [name(i) for i in range(NODES)]
        self.cards = {name(i): node_cards(i) for i in range(NODES)}

    def capacity(self, node: str) -> Cards:
        return self.cards[node][0]

    def usage(self, node: str) -> Cards:
        return self.cards[node][1]

    def fits(self, node: str, request: Cards) -> int:
        if not request:
            return UNBOUNDED
        capacity, usage = self.cards[node]
        return min(max(capacity.get(p, 0) - usage.get(p, 0), 0) // k for p, k in request.items())


@pytest.fixture
def pod(plugin: Plugin, etcd: Etcd) -> Iterator[Pod]:
    pod = Pod(plugin, etcd)
    etcd.put_many(
        {
            etcd.head_key(node): json.dumps(upstream_head(*pod.cards[node])).encode()
            for node in pod.names
        }
    )
    assert len(etcd.snapshot()) == NODES
    with no_write(etcd):
        yield pod


@pytest.mark.parametrize("request_", [{G: 2}, {G: 1, A: 1}, {}], ids=["one", "two", "none"])
def test_deploy_capacity_of_1500_nodes(pod: Pod, request_: Cards) -> None:
    answer = pod.plugin.ok(
        "get-nodes-deploy-capacity",
        {"nodenames": pod.names, "workload_resource": R(request_) if request_ else None},
    )
    expected = {node: pod.fits(node, request_) for node in pod.names}
    expected = {node: n for node, n in expected.items() if n > 0}
    found = answer["nodes_deploy_capacity_map"]
    assert {node: entry["Capacity"] for node, entry in found.items()} == expected
    assert answer["total"] == sum(expected.values())
    if not request_:
        assert answer["total"] == NODES * UNBOUNDED
    for node, entry in found.items():
        cards = sum(pod.capacity(node).values())
        assert entry["Usage"] == pytest.approx(float(ratio(sum(pod.usage(node).values()), cards)))
        assert entry["Rate"] == pytest.approx(float(ratio(sum(request_.values()), cards)))
        assert entry["Weight"] == 1


def test_most_idle_of_1500_nodes(pod: Pod) -> None:
    def key(node: str) -> tuple[Fraction, str]:
        capacity, usage = pod.cards[node]
        return ratio(sum(usage.values()), sum(capacity.values())), node

    expected = min(pod.names, key=key)
    for order in (pod.names, pod.names[::-1]):
        answer = pod.plugin.ok("get-most-idle-node", {"nodenames": order})
        assert answer == {"nodename": expected, "priority": 100}
    # among nodes that all use cards, the lowest ratio wins
    busy = [node for node in pod.names if key(node)[0] > 0]
    answer = pod.plugin.ok("get-most-idle-node", {"nodenames": busy[::-1]})
    assert answer["nodename"] == min(busy, key=key)


def test_resource_info_of_1500_nodes(pod: Pod) -> None:
    answer = pod.plugin.ok(
        "get-nodes-resource-info", {"nodenames": [*pod.names, "unknown-1", "unknown-2"]}
    )
    found = answer["node_resource_info_map"]
    assert set(found) == {*pod.names, "unknown-1", "unknown-2"}  # never seen: empty nodes
    for node, entry in found.items():
        known = node in pod.cards
        assert counts(entry["capacity"]) == (pod.capacity(node) if known else {})
        assert counts(entry["usage"]) == (pod.usage(node) if known else {})
    total_capacity = sum(sum(counts(e["capacity"]).values()) for e in found.values())
    assert total_capacity == sum(sum(pod.capacity(n).values()) for n in pod.names)


def test_batched_metrics_of_1500_nodes(pod: Pod) -> None:
    answer = pod.plugin.ok(
        "get-metrics", {"nodes": [{"podname": "pod1", "nodename": n} for n in pod.names]}
    )
    expected: Counter[tuple[Any, ...]] = Counter()
    for node in pod.names:
        capacity, usage = pod.cards[node]
        for product in capacity:
            labels = ("pod1", node, product)
            base = f"core.node.{node.replace('.', '_')}.gpu.{product.replace('.', '_')}"
            expected[("gpu_capacity", labels, f"{base}.capacity", str(capacity[product]))] += 1
            expected[("gpu_used", labels, f"{base}.used", str(usage.get(product, 0)))] += 1
    got = Counter((m["name"], tuple(m["labels"]), m["key"], m["value"]) for m in answer)
    assert got == expected
    capacity_total = sum(int(m["value"]) for m in answer if m["name"] == "gpu_capacity")
    assert capacity_total == sum(sum(pod.capacity(n).values()) for n in pod.names)
