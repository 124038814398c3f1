"""Stored usage against the workloads' sum (get-node-resource-info and fix-node-resource), with
upstream's texts in a fixed order."""

from __future__ import annotations

import pytest

from resource_extend.ledger.model.errors import InvalidRequest, NodeNotFound
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.state import validated
from resource_extend.projections.storage.verbs.diffs import fixed, node_diffs, usage_diffs
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource

G, T = 2**30, 2**40
F4 = validated(NodeResource(volumes={f"/data{i}": T for i in range(4)}, storage=4 * T), None)
UPSTREAM_WORKLOADS = [WorkloadResource(storage_request=1), WorkloadResource(storage_limit=1)]


def on(device: str, *quota: int, mounts: list[str] | None = None) -> Disk:
    return Disk(device=device, mounts=mounts).with_quota((*quota, 0, 0, 0, 0)[:4])


def test_upstream_vector_one_storage_diff() -> None:
    assert node_diffs("test0", F4, UPSTREAM_WORKLOADS) == [
        "node.Storage != sum(workload.Storage): 0 != 1"
    ]


def test_a_node_that_agrees_has_no_diffs() -> None:
    assert node_diffs("test0", F4, []) == []
    assert node_diffs("test0", F4, [None]) == []


def test_unknown_node() -> None:
    with pytest.raises(NodeNotFound):
        node_diffs("abc", None, [])
    with pytest.raises(NodeNotFound):
        fixed("abc", None, [])


def test_volume_diffs_usage_paths_first_then_paths_only_workloads_hold() -> None:
    usage = NodeResource(volumes={"/b": 5, "/a": 1, "/same": 3})
    held = NodeResource(volumes={"/z": 2, "/b": 4, "/same": 3, "/c": 7, "/zero": 0})
    assert usage_diffs(usage, held) == [
        "node.Volumes[/a] != sum(workload.Volumes[/a]): 1 != 0",
        "node.Volumes[/b] != sum(workload.Volumes[/b]): 5 != 4",
        "node.Volumes[/c] != sum(workload.Volumes[/c]): 0 != 7",
        "node.Volumes[/z] != sum(workload.Volumes[/z]): 0 != 2",
    ]


def test_disk_diffs_show_both_with_the_stored_mounts() -> None:
    usage = NodeResource(
        disks=[on("/dev/vdb", 1, mounts=["/b"]), on("/dev/vda", 5, 5, 5, 5, mounts=["/", "/d"])]
    )
    held = NodeResource(disks=[on("/dev/vda", 5, 5, 5, 4), on("/dev/vdz", 9), on("/dev/vdy")])
    capacity = [on("/dev/vdz", 100, mounts=["/z"]), on("/dev/vdy", 100, mounts=["/y"])]
    assert usage_diffs(usage, held, capacity) == [
        "node.Disks[/dev/vda] != sum(workload.Disks[/dev/vda]): "
        "/dev/vda:/,/d:5:5:5:5 != /dev/vda:/,/d:5:5:5:4",
        "node.Disks[/dev/vdb] != sum(workload.Disks[/dev/vdb]): "
        "/dev/vdb:/b:1:0:0:0 != /dev/vdb:/b:0:0:0:0",
        "node.Disks[/dev/vdz] != sum(workload.Disks[/dev/vdz]): "
        "/dev/vdz:/z:0:0:0:0 != /dev/vdz:/z:9:0:0:0",
    ]  # a disk only the workloads hold quota on comes last (vdz; upstream left it out), with
    # the node's mounts for it; one they hold no quota on (vdy) agrees with no usage


def test_diffs_come_storage_volumes_disks() -> None:
    usage = NodeResource(volumes={"/a": 1}, disks=[on("/dev/vda", 1)], storage=1)
    diffs = usage_diffs(usage, NodeResource())
    assert [line.split("[")[0].split(" ")[0] for line in diffs] == [
        "node.Storage",
        "node.Volumes",
        "node.Disks",
    ]


def test_fix_rebuilds_usage_from_the_workloads() -> None:
    diffs, state = fixed("test0", F4, UPSTREAM_WORKLOADS)
    assert diffs == ["node.Storage != sum(workload.Storage): 0 != 1"]
    assert state is not None
    assert state.usage == NodeResource(volumes={}, disks=[], storage=1)
    assert state.capacity == F4.capacity


def test_fix_of_a_node_that_agrees_writes_nothing() -> None:
    assert fixed("test0", F4, []) == ([], None)


def test_fix_takes_the_workloads_disks_with_capacity_mounts() -> None:
    vda = Disk(device="/dev/vda", mounts=["/"]).with_quota((100, 100, 100, 100))
    node = validated(NodeResource(volumes={"/data0": T}, disks=[vda], storage=T), None)
    workload = WorkloadResource(
        volume_plan_request={f"AUTO:/x:rw:{G}:10:0:0:0": {"/data0": G}},
        storage_request=G,
        disks_request=[on("/dev/vda", 10), on("", mounts=None)],
    )
    diffs, state = fixed("n", node, [workload])
    assert len(diffs) == 3
    assert state is not None
    assert state.usage == NodeResource(
        volumes={"/data0": G}, disks=[on("/dev/vda", 10, mounts=["/"])], storage=G
    )
    assert node_diffs("n", state, [workload]) == []


def test_fix_that_breaks_a_rule_fails() -> None:
    """Decision 3: upstream reported "fix failed" and returned the unsaved usage."""
    workload = WorkloadResource(volume_plan_request={"k": {"/data0": 2 * T}})
    with pytest.raises(InvalidRequest, match="invalid size in usage"):
        fixed("test0", F4, [workload])
