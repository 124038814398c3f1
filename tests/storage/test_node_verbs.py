"""Upstream's node-verb vectors (upstream's storage tests) through the installed
``resource-storage``, against real etcd, with this project's decisions where they differ."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.plugin import Plugin
from tests.storage.helpers import F4_VOLUMES, G, T, add_f4, capacity_storage, info, usage_storage

pytestmark = pytest.mark.resident


def test_add_node_twice_fails_and_a_new_node_counts_its_volumes(storage: Plugin) -> None:
    add_f4(storage)
    assert "node already exists" in storage.fails(
        "add-node", {"nodename": "test0", "resource": {"volumes": F4_VOLUMES}}
    )
    answer = add_f4(storage, "test2", ["/data0:1T"])
    assert answer["capacity"]["storage"] == T
    assert answer["usage"] == {"volumes": {"/data0": 0}, "disks": [], "storage": 0}


def test_remove_node_succeeds_for_a_node_and_for_none(storage: Plugin) -> None:
    add_f4(storage)
    assert storage.ok("remove-node", {"nodename": "test0"}) is None
    assert storage.ok("remove-node", {"nodename": "test2"}) is None
    assert info(storage, "test0") is None  # removed: read as never known


def test_add_node_takes_what_it_lacks_from_the_engine(storage: Plugin) -> None:
    engine = {"volumes": {"/mnt/x/eru": 100 * G}, "disks": None, "storage": 100 * G}
    encoded = base64.b64encode(json.dumps(engine).encode()).decode()
    answer = storage.ok(
        "add-node",
        {"nodename": "vm", "resource": {}, "info": {"Resources": {"storage": encoded}}},
    )
    assert answer["capacity"] == {
        "volumes": {"/mnt/x/eru": 100 * G},
        "disks": None,
        "storage": 80 * G,  # 80 % of the engine's storage when the request names none
    }


def set_capacity(storage: Plugin, node: str, *, delta: bool, **given: Any) -> Any:
    return storage.ok(
        "set-node-resource-capacity",
        {"nodename": node, "delta": delta, "incr": given.pop("incr", True), **given},
    )


def test_set_capacity_vectors(storage: Plugin) -> None:
    """Upstream's capacity table: storage after each step."""
    add_f4(storage)
    resource = {"volumes": {"/data4": T}, "storage": T}
    set_capacity(storage, "test0", delta=True, resource=resource)
    assert capacity_storage(storage, "test0") == 5 * T
    set_capacity(storage, "test0", delta=True, resource=resource, incr=False)
    assert capacity_storage(storage, "test0") == 4 * T
    assert "/data4" not in info(storage, "test0")["capacity"]["volumes"]
    request = {"volumes": ["/data4:1T"], "storage": "1T"}
    set_capacity(storage, "test0", delta=True, resource_request=request)
    assert capacity_storage(storage, "test0") == 6 * T
    set_capacity(storage, "test0", delta=True, resource_request=request, incr=False)
    assert capacity_storage(storage, "test0") == 4 * T
    set_capacity(storage, "test0", delta=False, resource_request=request)
    after = info(storage, "test0")["capacity"]
    assert after["storage"] == 2 * T and after["volumes"] == {"/data4": T}


def test_capacity_rollback_through_before_restores_it_exactly(storage: Plugin) -> None:
    """An upstream bug (docs/differences.md): core rolls back with resource_request = before,
    delta=false, which upstream's request parser read as empty (capacity wiped). Ours restores
    it, twice over."""
    storage.ok(
        "add-node",
        {
            "nodename": "n",
            "resource": {
                "volumes": F4_VOLUMES,
                "disks": ["/dev/vda:/,/data0:1000:1000:1G:1G"],
            },
        },
    )
    changed = set_capacity(
        storage, "n", delta=True, resource_request={"volumes": ["/data4:1T"], "storage": "1T"}
    )
    before = changed["before"]
    for _ in range(2):
        set_capacity(storage, "n", delta=False, resource_request=before)
        assert info(storage, "n")["capacity"] == before


def test_rm_disks(storage: Plugin) -> None:
    storage.ok(
        "add-node",
        {
            "nodename": "n",
            "resource": {
                "volumes": ["/data0:1T"],
                "disks": ["/dev/vda:/:100:100:1G:1G", "/dev/vdb:/data0:100:100:1G:1G"],
            },
        },
    )
    line = storage.fails(
        "set-node-resource-capacity",
        {"nodename": "n", "resource_request": {"rm-disks": "/dev/vdb"}, "delta": True},
    )
    assert "invalid engine args" in line
    set_capacity(storage, "n", delta=False, resource_request={"rm-disks": "/dev/vdb"})
    state = info(storage, "n")
    assert [d["device"] for d in state["capacity"]["disks"]] == ["/dev/vda"]
    assert [d["device"] for d in state["usage"]["disks"]] == ["/dev/vda"]


def test_rm_disks_of_a_disk_in_use_is_refused(storage: Plugin) -> None:
    storage.ok(
        "add-node",
        {
            "nodename": "n",
            "resource": {"volumes": ["/data0:1T"], "disks": ["/dev/vdb:/:100:100:1G:1G"]},
        },
    )
    disk = {
        "device": "/dev/vdb",
        "mounts": ["/"],
        "read_IOPS": 10,
        "write_IOPS": 0,
        "read_bps": 0,
        "write_bps": 0,
    }
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "resource": {"disks": [disk]}, "delta": True, "incr": True},
    )
    line = storage.fails(
        "set-node-resource-capacity",
        {"nodename": "n", "resource_request": {"rm-disks": "/dev/vdb"}, "delta": False},
    )
    assert "invalid disk" in line
    assert [d["device"] for d in info(storage, "n")["capacity"]["disks"]] == ["/dev/vdb"]


def set_usage(storage: Plugin, *, delta: bool = True, incr: bool = True, **given: Any) -> Any:
    return storage.ok(
        "set-node-resource-usage",
        {"nodename": "test0", "delta": delta, "incr": incr, **given},
    )


def test_set_usage_vectors(storage: Plugin) -> None:
    """Upstream's usage sequence: usage storage after each step."""
    add_f4(storage)
    steps: list[tuple[dict[str, Any], int]] = [
        ({"resource": {"volumes": {"/data4": T}, "storage": T}}, T),
        ({"resource": {"volumes": {"/data4": T}, "storage": T}, "incr": False}, 0),
        ({"resource_request": {"volumes": ["/data4:1T"], "storage": "1T"}}, 2 * T),
        ({"resource_request": {"volumes": ["/data4:1T"], "storage": "1T"}, "incr": False}, 0),
        ({"incr": False}, 0),
        ({"workloads_resource": [{"storage_request": 1}, {"storage_limit": 1}]}, 1),
        ({"workloads_resource": [{"storage_request": 1}, {"storage_limit": 1}], "incr": False}, 0),
    ]
    for given, expected in steps:
        set_usage(storage, **given)
        assert usage_storage(storage, "test0") == expected, given


def test_absolute_usage_of_a_path_capacity_lacks_is_accepted(storage: Plugin) -> None:
    add_f4(storage)
    set_usage(storage, delta=False, resource={"volumes": {"/data4": T}, "storage": T})
    usage = info(storage, "test0")["usage"]
    assert usage["storage"] == T and usage["volumes"]["/data4"] == T


def test_usage_past_a_volume_capacity_is_refused_and_writes_nothing(storage: Plugin) -> None:
    add_f4(storage)
    before = info(storage, "test0")
    line = storage.fails(
        "set-node-resource-usage",
        {
            "nodename": "test0",
            "resource": {"volumes": {"/data0": T + 1}},
            "delta": True,
            "incr": True,
        },
    )
    assert "invalid size in usage" in line
    assert info(storage, "test0") == before
    assert len(storage.history("test0")) == 1


def test_info_diffs_and_fix(storage: Plugin) -> None:
    assert info(storage, "abc") is None
    assert "node not exists" in storage.fails("fix-node-resource", {"nodename": "abc"})
    add_f4(storage)
    assert capacity_storage(storage, "test0") == 4 * T
    workloads = [{"storage_request": 1}, {"storage_limit": 1}]
    assert info(storage, "test0", workloads)["diffs"] == [
        "node.Storage != sum(workload.Storage): 0 != 1"
    ]
    fixed = storage.ok("fix-node-resource", {"nodename": "test0", "workloads_resource": workloads})
    assert fixed["diffs"] and fixed["usage"]["storage"] == 1
    assert usage_storage(storage, "test0") == 1
    assert storage.history("test0")[-1]["change"]["kind"] == "usage_rebuilt"


def test_set_node_resource_info_stores_storage_as_given(storage: Plugin) -> None:
    """Upstream added the volumes to capacity storage again (2 T); ours stores 1 T."""
    capacity = {"volumes": {"/data4": T}, "storage": T}
    usage = {"volumes": {"/data3": T}, "storage": 4 * T}
    assert (
        storage.ok(
            "set-node-resource-info", {"nodename": "test0", "capacity": capacity, "usage": usage}
        )
        is None
    )
    state = info(storage, "test0")
    assert state["capacity"]["storage"] == T and state["usage"]["storage"] == 4 * T


def test_most_idle_metrics_name_remap(storage: Plugin) -> None:
    add_f4(storage)
    add_f4(storage, "test1")
    assert storage.ok("get-most-idle-node", {"nodenames": ["test1", "test0"]}) == {
        "nodename": "test1",
        "priority": 1,
    }
    assert len(storage.ok("get-metrics-description")) == 2
    assert "node name is empty" in storage.fails("get-metrics", {"podname": "", "nodename": ""})
    metrics = storage.ok("get-metrics", {"podname": "testpod", "nodename": "test0"})
    assert [(m["name"], m["key"], m["value"]) for m in metrics] == [
        ("storage_used", "core.node.test0.storage.used", "0"),
        ("storage_capacity", "core.node.test0.storage.capacity", str(4 * T)),
    ]
    assert "storage" in storage.ok("name")
    assert storage.ok("calculate-remap") == {"engine_params_map": None}


@pytest.mark.parametrize(
    "request_",
    [
        {"nodename": "n", "resource": {"volumes": ["/data0"]}},
        {"nodename": "n", "resource": {"volumes": ["/data0:1X"]}},
        {"nodename": "n", "resource": {"disks": ["/dev/vda:/:1:1:1"]}},
        {"nodename": "n", "resource": {"storage": 1.5}},
        {"nodename": "n", "resource": {"volumes": "/data0:1T"}},
        {"nodename": "", "resource": {}},
    ],
)
def test_bad_node_requests_fail_in_one_line_and_write_nothing(
    storage: Plugin, request_: dict[str, Any]
) -> None:
    storage.fails("add-node", request_)
    assert storage.ok("nodes", None, "--json") == []


def test_auditor_commands_read_storage_nodes(storage: Plugin) -> None:
    add_f4(storage)
    storage.ok(
        "set-node-resource-usage",
        {
            "nodename": "test0",
            "resource": {"volumes": {"/data0": 100 * G}, "storage": 100 * G},
            "delta": True,
            "incr": True,
        },
    )
    listing = storage.ok("nodes", None, "--json")
    assert [(n["nodename"], n["state"], n["events"]) for n in listing] == [("test0", "live", 2)]
    assert listing[0]["usage"]["volumes"]["/data0"] == 100 * G
    table = storage.run("nodes")
    assert table.status == 0 and "/data0 100G/1T" in table.stdout and "100G/4T" in table.stdout
    history = storage.run("history", None, "test0")
    assert history.status == 0 and "usage /data0 +100G" in history.stdout, history.stdout
    shown = storage.ok("show", None, "test0", "--at", "1", "--json")
    assert shown["usage"]["storage"] == 0 and shown["seq"] == 1
    verified = storage.run("verify", None, "--all")
    assert verified.status == 0, verified.stdout + verified.stderr
