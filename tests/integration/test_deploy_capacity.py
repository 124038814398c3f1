"""get-nodes-deploy-capacity (docs/verbs.md; upstream's vectors for it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.helpers import (
    EIGHT,
    RG,
    G,
    Spec,
    put_upstream_records,
    set_capacity,
    set_usage,
)
from tests.plugin import Plugin, R

pytestmark = pytest.mark.resident

FULL = ["n1", "n2"]
"""Two nodes with ``{"nvidia-3070": 4, "nvidia-3090": 4}``."""
EMPTY = ["e1", "e2"]
"""Two nodes added with no cards."""
UNBOUNDED = 1_000_000


@pytest.fixture(scope="module")
def pod(shared_plugin: Plugin) -> Plugin:
    for node in FULL:
        shared_plugin.add(node, EIGHT)
    for node in EMPTY:
        shared_plugin.add(node, None)
    return shared_plugin


def check_entry(entry: dict[str, Any], capacity: int, usage: float, rate: float) -> None:
    assert set(entry) == {"Capacity", "Usage", "Rate", "Weight"}, entry
    assert entry["Capacity"] == capacity
    assert isinstance(entry["Capacity"], int) and not isinstance(entry["Capacity"], bool)
    assert entry["Usage"] == pytest.approx(usage)
    assert entry["Rate"] == pytest.approx(rate)
    assert entry["Weight"] == pytest.approx(1)


@pytest.mark.parametrize(
    ("nodes", "request_cards", "per_node", "total"),
    [
        pytest.param(EMPTY, None, UNBOUNDED, 2 * UNBOUNDED, id="null on empty nodes"),
        pytest.param(FULL, None, UNBOUNDED, 2 * UNBOUNDED, id="null on 8-card nodes"),
        pytest.param(FULL, {}, UNBOUNDED, 2 * UNBOUNDED, id="empty map on 8-card nodes"),
        pytest.param(FULL, {3070: 2}, 2, 4, id="{3070:2}"),
        pytest.param(FULL, {3070: 3}, 1, 2, id="{3070:3}"),
        pytest.param(FULL, {3070: 5}, 0, 0, id="{3070:5}"),
        pytest.param(FULL, {3070: 1, 3090: 1}, 4, 8, id="{3070:1,3090:1}"),
        pytest.param(FULL, {3070: 1, 3090: 2}, 2, 4, id="{3070:1,3090:2}"),
        pytest.param(FULL, {3070: 2, 3090: 2}, 2, 4, id="{3070:2,3090:2}"),
        pytest.param(FULL, {3070: 4, 3090: 4}, 1, 2, id="{3070:4,3090:4}"),
        pytest.param(FULL, {3070: 5, 3090: 4}, 0, 0, id="{3070:5,3090:4}"),
        pytest.param(FULL, {3080: 1}, 0, 0, id="product the nodes lack"),
        pytest.param(FULL, {3070: 1, 3080: 1}, 0, 0, id="one product the nodes lack"),
        pytest.param(EMPTY, {3070: 2}, 0, 0, id="{3070:2} on empty nodes"),
        pytest.param(FULL + EMPTY, {3070: 2}, 2, 4, id="{3070:2} on all four"),
        pytest.param(FULL + EMPTY, None, UNBOUNDED, 4 * UNBOUNDED, id="null on all four"),
    ],
)
def test_deploy_capacity_table(
    pod: Plugin, nodes: list[str], request_cards: Spec | None, per_node: int, total: int
) -> None:
    answer = pod.ok(
        "get-nodes-deploy-capacity", {"nodenames": nodes, "workload_resource": RG(request_cards)}
    )
    assert set(answer) == {"nodes_deploy_capacity_map", "total"}
    found = answer["nodes_deploy_capacity_map"]
    assert answer["total"] == total
    if per_node == 0:
        assert found == {}  # nodes that fit nothing are left out
        return
    requested = sum((request_cards or {}).values())
    expected = {n for n in nodes if n in FULL} if request_cards else set(nodes)
    assert set(found) == expected
    for node, entry in found.items():
        cards = 8 if node in FULL else 0
        check_entry(entry, per_node, 0.0, requested / cards if cards else 0.0)


@pytest.mark.parametrize(
    "nodenames", [pytest.param(["xxx"], id="alone"), pytest.param(["n1", "n2", "xxx"], id="among")]
)
def test_an_unknown_node_is_an_empty_one(pod: Plugin, nodenames: list[str]) -> None:
    """A node the plugin never saw (one added before it was installed) has no cards: it hosts
    none of a request for cards, and 1000000 of one without."""
    cards = pod.ok(
        "get-nodes-deploy-capacity", {"nodenames": nodenames, "workload_resource": RG({3070: 2})}
    )
    assert "xxx" not in cards["nodes_deploy_capacity_map"]
    none = pod.ok("get-nodes-deploy-capacity", {"nodenames": nodenames, "workload_resource": None})
    assert none["nodes_deploy_capacity_map"]["xxx"] == {
        "Capacity": 1000000, "Usage": 0, "Rate": 0, "Weight": 1
    }  # fmt: skip


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param({"nodenames": [], "workload_resource": RG({3070: 1})}, id="empty list"),
        pytest.param({"nodenames": None, "workload_resource": RG({3070: 1})}, id="null"),
        pytest.param({"workload_resource": RG({3070: 1})}, id="missing"),
    ],
)
def test_no_node_names_is_an_error(plugin: Plugin, request_body: dict[str, Any]) -> None:
    line = plugin.fails("get-nodes-deploy-capacity", request_body)
    assert "node name is empty" in line


def test_usage_and_rate_follow_node_usage(plugin: Plugin) -> None:
    for node in ("n1", "n2", "n3"):
        plugin.add(node, EIGHT)
    set_usage(plugin, "n1", G({3070: 2, 3090: 1}))
    set_usage(plugin, "n3", G({3070: 1}))
    set_capacity(plugin, "n3", G({3070: 1, 3090: 1}))  # its 3070 card is in use
    request = {"nodenames": ["n1", "n2", "n3"], "workload_resource": RG({3070: 1})}
    answer = plugin.ok("get-nodes-deploy-capacity", request)
    found = answer["nodes_deploy_capacity_map"]
    assert set(found) == {"n1", "n2"}  # n3 has no 3070 available
    check_entry(found["n1"], 2, 3 / 8, 1 / 8)
    check_entry(found["n2"], 4, 0.0, 1 / 8)
    assert answer["total"] == 6
    request["workload_resource"] = None
    found = plugin.ok("get-nodes-deploy-capacity", request)["nodes_deploy_capacity_map"]
    check_entry(found["n1"], UNBOUNDED, 3 / 8, 0.0)
    check_entry(found["n3"], UNBOUNDED, 1 / 2, 0.0)


def test_capacity_below_usage_fits_nothing(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 3}))
    set_capacity(plugin, "n1", G({3070: 1, 3090: 4}))  # capacity below usage: 3070 -2
    request = {"nodenames": ["n1"], "workload_resource": RG({3070: 1})}
    assert plugin.ok("get-nodes-deploy-capacity", request) == {
        "nodes_deploy_capacity_map": {},
        "total": 0,
    }
    request["workload_resource"] = RG({3090: 2})
    found = plugin.ok("get-nodes-deploy-capacity", request)["nodes_deploy_capacity_map"]
    check_entry(found["n1"], 2, 3 / 5, 2 / 5)


def test_more_than_128_nodes_in_one_call(plugin: Plugin) -> None:
    """Upstream breaks above 128 nodes (one etcd txn); ours must not. The 300 records are laid
    down in the upstream plugin's format to keep set-up fast."""
    names = [f"node-{i:03d}" for i in range(300)]
    records = {n: ({"nvidia-3070": 1 + i % 4}, {"nvidia-3070": i % 2}) for i, n in enumerate(names)}
    put_upstream_records(plugin, records)
    request = {"nodenames": names, "workload_resource": R({"nvidia-3070": 1})}
    answer = plugin.ok("get-nodes-deploy-capacity", request)
    expected = {n: 1 + i % 4 - i % 2 for i, n in enumerate(names)}
    found = answer["nodes_deploy_capacity_map"]
    assert {n: e["Capacity"] for n, e in found.items()} == {
        n: c for n, c in expected.items() if c > 0
    }
    assert answer["total"] == sum(expected.values())
    info = plugin.ok("get-nodes-resource-info", {"nodenames": names})["node_resource_info_map"]
    assert set(info) == set(names)
