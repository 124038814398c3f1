"""Each upstream resource-storage bug this plugin fixes (the contract's decision 3), pinned
through the installed binary against real etcd. The README's table names these tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugin import Plugin
from tests.storage.helpers import G, T, add_f4, info

DISK = "/dev/vda:/,/data0:1000:1000:1G:1G"


def deploy(storage: Plugin, request: dict[str, Any], node: str = "n", count: int = 1) -> Any:
    return storage.run(
        "calculate-deploy",
        {"nodename": node, "deploy_count": count, "workload_resource_request": request},
    )


def add_with_disk(storage: Plugin, node: str = "n") -> None:
    storage.ok(
        "add-node",
        {"nodename": node, "resource": {"volumes": ["/data0:1T", "/data1:1T"], "disks": [DISK]}},
    )


def test_storage_given_as_a_json_number_counts(storage: Plugin) -> None:
    """eru-cli sends storage as numbers; upstream read them as 0 (only strings)."""
    add_f4(storage, "n")
    planned = deploy(storage, {"storage-request": 10 * G, "storage-limit": 10 * G})
    assert planned.status == 0, planned.stderr
    [workload] = planned.answer["workloads_resource"]
    assert workload["storage_request"] == 10 * G
    capacity = storage.ok(
        "get-nodes-deploy-capacity", {"nodenames": ["n"], "workload_resource": {"storage": T}}
    )
    assert capacity["total"] == 4


def test_a_field_spelt_in_another_case_is_refused(storage: Plugin) -> None:
    """Go matched ``Storage_Request`` to the field. Ignored as an unknown key, a release would
    give back nothing, and usage would drift without an error: refused, nothing written."""
    add_f4(storage, "n")
    [workload] = deploy(storage, {"volumes": ["AUTO:/d:rw:1G"]}).answer["workloads_resource"]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    before = info(storage, "n")
    shouting = {key.upper(): value for key, value in workload.items()}
    line = storage.fails(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [shouting], "delta": True, "incr": False},
    )
    assert "is not a field" in line and "workloads_resource[0]" in line, line
    assert info(storage, "n") == before
    assert len(storage.history("n")) == 2


def test_a_storage_only_realloc_keeps_the_workloads_disk_quota(storage: Plugin) -> None:
    """Upstream dropped disks_request when nothing needed placing, and its delta gave the
    workload's IOPS back to the node while the workload kept using them."""
    add_with_disk(storage)
    request = {"volumes": ["AUTO:/fast:rw:1G:100:100:1M:1M"]}
    [workload] = deploy(storage, request).answer["workloads_resource"]
    assert workload["disks_request"][0]["read_IOPS"] == 100
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    grown = storage.run(
        "calculate-realloc",
        {"nodename": "n", "workload_resource": workload,
         "workload_resource_request": {"storage": "1G"}},
    )  # fmt: skip
    assert grown.status == 0, grown.stderr
    assert grown.answer["workload_resource"]["disks_request"] == workload["disks_request"]
    delta = grown.answer["delta_resource"]
    assert all(d[k] == 0 for d in delta["disks_request"] for k in ("read_IOPS", "write_IOPS"))
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [delta], "delta": True, "incr": True},
    )
    held = [grown.answer["workload_resource"]]
    assert info(storage, "n", held)["diffs"] == []


def test_a_path_no_disk_serves_any_more_is_skipped_not_a_crash(storage: Plugin) -> None:
    """After rm-disks, a realloc of a workload whose mount had IOPS on that disk: upstream
    dereferenced a missing disk (a Go panic); here the quota is simply not charged."""
    storage.ok(
        "add-node",
        {"nodename": "n", "resource": {"volumes": ["/data0:1T"],
                                       "disks": ["/dev/vdb:/mnt:100:100:1G:1G"]}},
    )  # fmt: skip
    request = {"volumes": ["/mnt/logs:/logs:rw:0:10:10:0:0"]}
    [workload] = deploy(storage, request).answer["workloads_resource"]
    storage.ok(
        "set-node-resource-capacity",
        {"nodename": "n", "resource_request": {"rm-disks": "/dev/vdb"}, "delta": False},
    )
    changed = storage.run(
        "calculate-realloc",
        {"nodename": "n", "workload_resource": workload,
         "workload_resource_request": {"storage": "1G"}},
    )  # fmt: skip
    assert changed.status == 0, changed.stderr
    assert changed.answer["engine_params"]["iops_options"] == {}


def test_a_fix_that_cannot_be_written_fails_the_verb(storage: Plugin) -> None:
    """Upstream appended "fix failed" to the diffs and exited 0 with an unsaved usage; core
    then dropped its repair entry. Here the verb fails and nothing is written."""
    add_f4(storage, "n")
    too_much = {"volume_plan_request": {"AUTO:/d:rw:1:0:0:0:0": {"/data0": 2 * T}}}
    line = storage.fails("fix-node-resource", {"nodename": "n", "workloads_resource": [too_much]})
    assert "invalid size in usage" in line
    assert len(storage.history("n")) == 1


def test_a_monopoly_binding_without_a_size_is_refused(storage: Plugin) -> None:
    """Upstream split a volume 0/0 among sizeless monopoly bindings that carried IOPS."""
    add_with_disk(storage)
    for binding in ("AUTO:/m:rwm:0:10:0:0:0", "AUTO:/m:rwm", "AUTO:/m:rwm:-1G"):
        line = storage.fails(
            "calculate-deploy",
            {"nodename": "n", "deploy_count": 1,
             "workload_resource_request": {"volumes": [binding]}},
        )  # fmt: skip
        assert "invalid volume" in line, line


def test_a_tiny_binding_on_huge_volumes_is_bounded(storage: Plugin) -> None:
    """Upstream enumerated every fitting copy: a 1-byte binding on 1 TiB volumes ran until
    core's 30 s timeout. Here placement stops at scheduler.max_deploy_count (100 here)."""
    add_f4(storage, "n")
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "resource": {"volumes": {"/data0": 1, "/data1": 1}},
         "delta": True, "incr": True},
    )  # fmt: skip
    capacity = storage.ok(
        "get-nodes-deploy-capacity",
        {"nodenames": ["n"], "workload_resource": {"volumes": ["AUTO:/tiny:rw:1"]}},
    )
    assert capacity["total"] == 100


def test_name_is_the_program(storage: Plugin) -> None:
    """Upstream printed {"name": "storage"} followed by null: two JSON values."""
    assert storage.ok("name") == "resource-storage"


@pytest.mark.parametrize("binding", ["AUTO:/x::-1G", "/src:/dst:rw:-1T"])
def test_a_negative_binding_is_refused_at_deploy(storage: Plugin, binding: str) -> None:
    """Upstream planned a negative normal size, which grew the volume during placement: its
    loop never ended. A mount's negative size went into the storage request, so committing it
    freed node storage other workloads hold. A negative size means "give back" only in a
    realloc."""
    add_f4(storage, "n")
    for verb, request in (
        ("calculate-deploy", {"nodename": "n", "deploy_count": 1,
                              "workload_resource_request": {"volumes": [binding]}}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n"],
                                       "workload_resource": {"volumes": [binding]}}),
    ):  # fmt: skip
        line = storage.fails(verb, request)
        assert "size can't be negative" in line, line


def test_two_bindings_with_one_destination_keep_their_own_plans(storage: Plugin) -> None:
    """Upstream merged the classes' plans by destination, adding the old size twice when two
    bindings shared one, and mounted both on one volume. Here each binding keeps its own entry
    and its own volume, and usage counts each once."""
    add_f4(storage, "n")
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "resource": {"volumes": {"/data0": 1}}, "delta": True, "incr": True},
    )
    request = {"volumes": ["AUTO:/data:rw:1G", "AUTO:/data:rwm:1G"]}
    planned = deploy(storage, request)
    assert planned.status == 0, planned.stderr
    [workload] = planned.answer["workloads_resource"]
    assert workload["volume_plan_request"] == {
        "AUTO:/data:mrw:1073741824:0:0:0:0": {"/data1": T},
        "AUTO:/data:rw:1073741824:0:0:0:0": {"/data0": G},
    }
    [engine] = planned.answer["engines_params"]
    assert sorted(engine["volumes"]) == [
        "/data0:/data:rw:1073741824",
        "/data1:/data:rw:1099511627776",
    ]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    assert info(storage, "n")["usage"]["volumes"] == {
        "/data0": G + 1, "/data1": T, "/data2": 0, "/data3": 0
    }  # fmt: skip
