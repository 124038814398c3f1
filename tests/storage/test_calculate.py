"""Upstream's calculate and capacity vectors (upstream's storage tests) through the installed
``resource-storage``, against real etcd, on node F4 (four 1 TiB volumes)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugin import Plugin
from tests.storage.helpers import G, T, add_f4

pytestmark = pytest.mark.resident


def capacity(storage: Plugin, nodes: list[str], request: dict[str, Any]) -> Any:
    return storage.ok(
        "get-nodes-deploy-capacity", {"nodenames": nodes, "workload_resource": request}
    )


def test_deploy_capacity_vectors(storage: Plugin) -> None:
    nodes = [f"test{i}" for i in range(10)]
    for node in nodes:
        add_f4(storage, node)
    assert "invalid storage" in storage.fails(
        "get-nodes-deploy-capacity", {"nodenames": nodes, "workload_resource": {"storage": "-1"}}
    )
    # a node never seen is an empty one: it hosts what asks nothing of it, to the bound
    unknown = capacity(storage, ["??"], {})["nodes_deploy_capacity_map"]
    assert unknown == {"??": {"Capacity": 100, "Usage": 0, "Rate": 0, "Weight": 1}}
    by_storage = capacity(storage, nodes, {"storage": str(T)})
    assert by_storage["total"] == 40
    assert by_storage["nodes_deploy_capacity_map"]["test0"] == {
        "Capacity": 4,
        "Usage": 0,
        "Rate": 0.25,  # storage only: by storage, 1 T of 4 T
        "Weight": 1,
    }
    # storage only: 4 T / 1 G per node, capped by max_deploy_count (100 here), as in
    # resource-extend (the older plugin left it uncapped: 4096 a node)
    assert capacity(storage, nodes, {"storage": "1G"})["total"] == 10 * 100
    mono = capacity(storage, nodes, {"volumes": ["AUTO:/dir0:rwm:1G"]})
    assert mono["total"] == 40
    assert mono["nodes_deploy_capacity_map"]["test0"]["Rate"] == 1 / 4096  # by volumes
    both = capacity(storage, nodes, {"volumes": ["AUTO:/dir0:rwm:1G"], "storage": "1T"})
    assert both["total"] == 30
    assert both["nodes_deploy_capacity_map"]["test0"]["Rate"] == 1 / 4096


def deploy(storage: Plugin, count: int, request: dict[str, Any], node: str = "test0") -> Any:
    return storage.run(
        "calculate-deploy",
        {"nodename": node, "deploy_count": count, "workload_resource_request": request},
    )


def test_calculate_deploy_vectors(storage: Plugin) -> None:
    add_f4(storage)
    assert "invalid storage" in storage.fails(
        "calculate-deploy",
        {"nodename": "test0", "deploy_count": 10, "workload_resource_request": {"storage": "-1"}},
    )
    nothing = {"nodename": "??", "deploy_count": 1, "workload_resource_request": {}}
    assert len(storage.ok("calculate-deploy", nothing)["workloads_resource"]) == 1  # never seen
    assert "not enough" in storage.fails(
        "calculate-deploy",
        {"nodename": "test0", "deploy_count": 10,
         "workload_resource_request": {"volumes": ["AUTO:/dir0:rwm:10T"]}},
    )  # fmt: skip
    ok = deploy(storage, 10, {"storage": str(G)})
    assert ok.status == 0 and len(ok.answer["workloads_resource"]) == 10
    assert deploy(storage, 10, {"volumes": ["AUTO:/dir0:rwm:1T"]}).status != 0
    one = deploy(storage, 1, {"volumes": ["AUTO:/dir0:rwm:1T"]})
    assert one.status == 0, one.stderr
    [workload] = one.answer["workloads_resource"]
    assert workload["volume_plan_request"] == {
        "AUTO:/dir0:mrw:1099511627776:0:0:0:0": {"/data0": T}
    }
    assert one.answer["engines_params"][0]["volumes"] == ["/data0:/dir0:rw:1099511627776"]


def test_a_deploy_commits_and_the_realloc_vectors(storage: Plugin) -> None:
    """Upstream's calculate-realloc vector: a workload of three bindings on F4, committed first."""
    add_f4(storage)
    plan = {
        "AUTO:/dir0:rw:107374182400:0:0:0:0": {"/data0": 100 * G},
        "AUTO:/dir1:mrw:107374182400:0:0:0:0": {"/data2": T},
        "AUTO:/dir2:rw:0:0:0:0:0": {"/data0": 0},
    }
    current = {
        "volumes_request": [
            "AUTO:/dir0:rw:107374182400:0:0:0:0",
            "AUTO:/dir1:mrw:107374182400:0:0:0:0",
            "AUTO:/dir2:rw:0:0:0:0:0",
        ],
        "volumes_limit": [
            "AUTO:/dir0:rw:107374182400:0:0:0:0",
            "AUTO:/dir1:mrw:107374182400:0:0:0:0",
            "AUTO:/dir2:rw:0:0:0:0:0",
        ],
        "volume_plan_request": plan,
        "volume_plan_limit": plan,  # as a deploy writes it
    }
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "test0", "workloads_resource": [current], "delta": True, "incr": True},
    )

    def realloc(request: dict[str, Any], node: str = "test0") -> Any:
        return storage.run(
            "calculate-realloc",
            {"nodename": node, "workload_resource": current, "workload_resource_request": request},
        )

    storage.ok("add-node", {"nodename": "empty", "resource": {}})
    assert realloc({}, "??").stdout == realloc({}, "empty").stdout  # never seen: empty
    three = current["volumes_request"]
    assert (
        "invalid storage"
        in realloc({"volume-request": three, "storage-request": "-1", "storage-limit": "-1"}).stderr
    )
    dir1 = ["AUTO:/dir1:mrw:100GiB"]
    assert (
        "not enough"
        in realloc({"volume-request": dir1, "volume-limit": dir1, "storage": "4T"}).stderr
    )
    big = ["AUTO:/dir1:mrw:1TiB"]
    assert "not enough" in realloc({"volume-request": big, "volume-limit": big}).stderr
    grown = realloc({"volume-request": dir1, "volume-limit": dir1, "storage": "1G"})
    assert grown.status == 0, grown.stderr
    answer = grown.answer
    assert answer["engine_params"]["volume_changed"] is False
    assert answer["workload_resource"]["volume_plan_request"] == {
        "AUTO:/dir0:rw:107374182400:0:0:0:0": {"/data0": 100 * G},
        "AUTO:/dir1:mrw:214748364800:0:0:0:0": {"/data2": T},
        "AUTO:/dir2:rw:0:0:0:0:0": {"/data0": 0},
    }
    only_storage = realloc({"storage": "1G"})
    assert only_storage.status == 0, only_storage.stderr
    assert only_storage.answer["engine_params"]["volume_changed"] is False
    assert (
        only_storage.answer["workload_resource"]["volume_plan_request"]
        == current["volume_plan_request"]
    )
    # core commits the delta: the node's usage moves by exactly the difference
    delta = grown.answer["delta_resource"]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "test0", "workloads_resource": [delta], "delta": True, "incr": True},
    )
    after = storage.ok(
        "get-node-resource-info",
        {"nodename": "test0", "workloads_resource": [answer["workload_resource"]]},
    )
    assert after["diffs"] == []
