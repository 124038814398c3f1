"""Where resource-storage follows resource-extend (its docs/storage.md and storage tests) rather
than the older plugin: the engine's StorageTotal at add-node, a deploy that opens no more unused
volumes than its copies need, and a storage-only capacity capped by
``scheduler.max_deploy_count``. Each through the process, as core runs it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.plugin import Plugin
from tests.storage.helpers import G, T, info

pytestmark = pytest.mark.resident

GI = 2**30


# -- add-node: the engine's StorageTotal ----------------------------------------------------


def added_storage(storage: Plugin, node: str, resource: Any, info_: Any) -> int:
    answer = storage.ok("add-node", {"nodename": node, "resource": resource, "info": info_})
    return int(answer["capacity"]["storage"])


def test_add_node_takes_80_percent_of_the_engines_storage_total(storage: Plugin) -> None:
    """The request names no storage and no volumes: 80 % of info.StorageTotal (Docker's
    engine report), as resource-extend; the older plugin wrote 0, and the node refused every
    workload asking for storage."""
    assert added_storage(storage, "e1", {}, {"StorageTotal": 1000 * G}) == 800 * G
    assert int(info(storage, "e1")["capacity"]["storage"]) == 800 * G
    request = {"nodenames": ["e1"], "workload_resource": {"storage": "100G"}}
    assert storage.ok("get-nodes-deploy-capacity", request)["total"] == 8
    # Go's integer arithmetic: 80 % rounds down
    assert added_storage(storage, "e2", None, {"StorageTotal": 11}) == 8


def test_what_the_request_names_wins_over_the_storage_total(storage: Plugin) -> None:
    assert added_storage(storage, "s", {"storage": "1T"}, {"StorageTotal": 10 * T}) == T
    volumes = {"volumes": ["/data0:1T"]}  # storage is the volumes' total
    assert added_storage(storage, "v", volumes, {"StorageTotal": 10 * T}) == T


def test_a_vm_engines_own_report_still_wins_over_the_storage_total(storage: Plugin) -> None:
    """yavirt sends its volumes and storage in Resources["storage"]: read as before."""
    reported = {"volumes": {"/mnt/x": 100 * G}, "disks": None, "storage": 100 * G}
    engine = base64.b64encode(json.dumps(reported).encode()).decode()
    info_ = {"Resources": {"storage": engine}, "StorageTotal": 10 * T}
    assert added_storage(storage, "vm", {}, info_) == 80 * G


@pytest.mark.parametrize("total", [-1, 2**63, "1T", 1.5])
def test_a_storage_total_that_is_not_an_int64_is_refused(storage: Plugin, total: Any) -> None:
    request = {"nodename": "bad", "resource": {}, "info": {"StorageTotal": total}}
    line = storage.fails("add-node", request)
    assert line.startswith("resource-storage add-node: node bad: "), line
    assert "StorageTotal" in line, line
    assert storage.info("bad") is None


# -- calculate-deploy opens unused volumes only as far as its copies need ------------------


def promotion_node(storage: Plugin) -> None:
    """/d0 of 1 TiB with 1 GiB used; /d1 and /d2 of 600 GiB, unused."""
    volumes = {"volumes": ["/d0:1T", "/d1:600G", "/d2:600G"]}
    storage.ok("add-node", {"nodename": "p", "resource": volumes})
    used = {"volumes": {"/d0": GI, "/d1": 0, "/d2": 0}, "disks": [], "storage": GI}
    request = {"nodename": "p", "resource": used, "delta": True, "incr": True}
    storage.ok("set-node-resource-usage", request)


def deploy(storage: Plugin, count: int, bindings: list[str]) -> Any:
    request = {"volumes-request": bindings, "volumes-limit": bindings}
    return storage.ok(
        "calculate-deploy",
        {"nodename": "p", "deploy_count": count, "workload_resource_request": request},
    )


def placed(answer: Any) -> list[str]:
    paths = []
    for workload in answer["workloads_resource"]:
        ((plan,),) = [list(v) for v in workload["volume_plan_request"].values()]
        paths.append(plan)
    return paths


def test_two_copies_stay_on_the_used_volume_and_keep_the_fresh_ones_whole(
    storage: Plugin,
) -> None:
    promotion_node(storage)
    normal = deploy(storage, 2, ["AUTO:/x:rw:500GiB"])
    assert placed(normal) == ["/d0", "/d0"]  # the older plugin: /d1 and /d2
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "p", "workloads_resource": normal["workloads_resource"], "delta": True,
         "incr": True},
    )  # fmt: skip
    # both fresh volumes are still whole: two monopoly copies take them
    monopoly = deploy(storage, 2, ["AUTO:/m:rwm:500GiB"])
    assert sorted(placed(monopoly)) == ["/d1", "/d2"]


def test_a_capacity_query_still_weighs_the_whole_node(storage: Plugin) -> None:
    """get-nodes-deploy-capacity promotes as far as the bound: /d0 holds 2, /d1 and /d2 one
    each."""
    promotion_node(storage)
    request = {"nodenames": ["p"], "workload_resource": {"volumes": ["AUTO:/x:rw:500GiB"]}}
    assert storage.ok("get-nodes-deploy-capacity", request)["total"] == 4
    assert placed(deploy(storage, 4, ["AUTO:/x:rw:500GiB"])) == ["/d1", "/d2", "/d0", "/d0"]


# -- a storage-only capacity is capped by the bound ------------------------------------------


def test_a_storage_only_capacity_is_capped_by_max_deploy_count(storage: Plugin) -> None:
    volumes = {"volumes": ["/data0:1T", "/data1:1T", "/data2:1T", "/data3:1T"]}
    storage.ok("add-node", {"nodename": "f4", "resource": volumes})
    request: dict[str, Any] = {"nodenames": ["f4"], "workload_resource": {"storage": "1G"}}
    entry = storage.ok("get-nodes-deploy-capacity", request)["nodes_deploy_capacity_map"]["f4"]
    assert entry["Capacity"] == 100  # the bound; the older plugin answered 4096 (4 T / 1 G)
    request["workload_resource"] = {"storage": "1T"}
    assert storage.ok("get-nodes-deploy-capacity", request)["total"] == 4  # storage binds
