"""The node verbs' decisions at the pure level, with upstream's vectors
on node F4: volumes /data0../data3 of 1 T each, capacity storage 4 T, no usage."""

from __future__ import annotations

from typing import Any

import hypothesis
import msgspec
import pytest
from hypothesis import strategies as st

from resource_extend.ledger.model.errors import InvalidRequest, NodeExists
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.node import STORAGE
from resource_extend.projections.storage.state import InvalidDiskQuota, NodeState, validated
from resource_extend.projections.storage.verbs.updates import (
    Given,
    add_node,
    chosen,
    set_capacity,
    set_info,
    set_usage,
)
from resource_extend.projections.storage.wire.node_requests import AskedResource, node_request_of
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource
from tests.unit.strategies import FAST

G, T = 2**30, 2**40
F4 = validated(
    NodeResource(volumes={f"/data{i}": T for i in range(4)}, disks=None, storage=4 * T), None
)
STORED = NodeResource(volumes={"/data4": T}, storage=T)
"""Upstream's ``resource``: a stored-form value (storage includes the volume)."""


def request(value: dict[str, Any]) -> AskedResource:
    parsed = node_request_of(value, "resource_request")
    assert isinstance(parsed, AskedResource)
    return parsed


REQUEST = request({"volumes": ["/data4:1T"], "storage": "1T"})
"""Upstream's ``resource_request``: storage 1 T plus the 1 T volume."""


# add-node


def test_add_node() -> None:
    state = add_node("test2", None, request({"volumes": ["/data0:1T"]}), None)
    assert state.capacity == NodeResource(volumes={"/data0": T}, disks=None, storage=T)
    assert state.usage == NodeResource(volumes={"/data0": 0}, disks=[], storage=0)


def test_add_node_that_exists() -> None:
    with pytest.raises(NodeExists):
        add_node("test0", F4, request({"volumes": ["/data0:1T"]}), None)


def test_add_node_storage_is_explicit_plus_volumes() -> None:
    state = add_node("n", None, request({"volumes": ["/a:1T", "/b:1T"], "storage": "1G"}), None)
    assert state.capacity.storage == 2 * T + G


YAVIRT = b'{"volumes": {"/mnt/x/eru": 1000, "/mnt/y/eru": 1001}, "disks": null, "storage": 2001}'


def test_add_node_takes_what_is_left_empty_from_the_engine() -> None:
    state = add_node("n", None, None, YAVIRT)
    assert state.capacity == NodeResource(
        volumes={"/mnt/x/eru": 1000, "/mnt/y/eru": 1001}, disks=None, storage=2001 * 8 // 10
    )
    assert state.usage.volumes == {"/mnt/x/eru": 0, "/mnt/y/eru": 0}


def test_add_node_request_wins_over_the_engine() -> None:
    vda = "/dev/vda:/:1:1:1:1"
    engine = b'{"volumes": {"/e": 1}, "disks": [{"device": "/dev/vdz"}], "storage": 100}'
    state = add_node("n", None, request({"volumes": ["/a:5"], "disks": [vda]}), engine)
    assert state.capacity.volumes == {"/a": 5}
    assert [d.device for d in state.capacity.disks or ()] == ["/dev/vda"]
    assert state.capacity.storage == 5


def test_add_node_without_storage_anywhere() -> None:
    assert add_node("n", None, request({}), None).capacity == NodeResource(
        volumes=None, disks=None, storage=0
    )


def test_add_node_bad_engine_data_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="engine"):
        add_node("n", None, None, b'{"storage": "lots"}')


# set-node-resource-capacity


def capacity_after(state: NodeState, given: Given | None, **flags: bool) -> NodeResource:
    return set_capacity("test0", state, given, **flags).capacity


def test_upstream_capacity_table() -> None:
    state = F4
    steps: list[tuple[Given, bool, bool, int]] = [
        (STORED, True, True, 5 * T),
        (STORED, True, False, 4 * T),
        (REQUEST, True, True, 6 * T),
        (REQUEST, True, False, 4 * T),
        (REQUEST, False, True, 2 * T),
    ]
    volumes_after = []
    for given, delta, incr, storage in steps:
        state = set_capacity("test0", state, given, delta=delta, incr=incr)
        assert state.capacity.storage == storage
        volumes_after.append(state.capacity.volumes)
    four = {f"/data{i}": T for i in range(4)}
    assert volumes_after == [
        {**four, "/data4": T},
        four,  # /data4 fell to 0 and went
        {**four, "/data4": T},
        four,
        {"/data4": T},  # absolute: the volumes given replace them
    ]


def test_absolute_keeps_absent_keys() -> None:
    vda = Disk(device="/dev/vda", mounts=["/"]).with_quota((1, 1, 1, 1))
    state = validated(NodeResource(volumes={"/a": T}, disks=[vda], storage=3 * T), None)
    assert capacity_after(state, request({}), delta=False, incr=True) == state.capacity
    only_storage = capacity_after(state, request({"storage": "5T"}), delta=False, incr=False)
    assert only_storage == NodeResource(volumes={"/a": T}, disks=[vda], storage=5 * T)


def test_absolute_storage_follows_the_volumes_when_only_they_are_given() -> None:
    """resource-extend's SkipEmpty example: {volumes [/data0:4G]} over {/data0 1G, storage 3G}."""
    state = validated(NodeResource(volumes={"/data0": G}, storage=3 * G), None)
    after = capacity_after(state, request({"volumes": ["/data0:4G"]}), delta=False, incr=True)
    assert after == NodeResource(volumes={"/data0": 4 * G}, disks=[], storage=6 * G)


def test_absolute_with_disks_given_replaces_them() -> None:
    vda, vdb = "/dev/vda:/:1:1:1:1", "/dev/vdb:/b:2:2:2:2"
    state = validated(NodeResource(disks=[Disk(device="/dev/vda")]), None)
    after = capacity_after(state, request({"disks": [vdb, vda]}), delta=False, incr=True)
    assert [d.text() for d in after.disks or ()] == [vda, vdb]  # sorted by device


def test_delta_adds_disks_and_replaces_mounts() -> None:
    state = validated(
        NodeResource(disks=[Disk(device="/dev/vda", mounts=["/"]).with_quota((1, 1, 1, 1))]), None
    )
    given = request({"disks": ["/dev/vda:/x:1:1:1:1", "/dev/vdb:/b:2:2:2:2"]})
    after = capacity_after(state, given, delta=True, incr=True)
    assert [d.text() for d in after.disks or ()] == ["/dev/vda:/x:2:2:2:2", "/dev/vdb:/b:2:2:2:2"]


def test_nothing_given_keeps_the_capacity() -> None:
    assert set_capacity("test0", F4, None, delta=False, incr=True) == F4
    assert set_capacity("test0", F4, None, delta=True, incr=True) == F4


def test_a_node_with_no_record_is_edited_as_the_empty_node() -> None:
    empty = STORAGE.empty()
    assert empty == validated(NodeResource(volumes={}, disks=[], storage=0), None)
    for delta in (True, False):
        created = set_capacity("??", None, REQUEST, delta=delta, incr=True)
        assert created == set_capacity("??", empty, REQUEST, delta=delta, incr=True)
        assert created.capacity.volumes == {"/data4": T}
    quota = NodeResource(disks=[Disk(device="/dev/vdb", mounts=["/b"]).with_quota((1, 0, 0, 0))])
    with pytest.raises(InvalidRequest, match="not found in capacity"):
        set_usage("??", None, quota, None, delta=True, incr=True)


def test_a_capacity_below_usage_is_refused() -> None:
    state = set_usage("test0", F4, NodeResource(volumes={"/data0": T}), None, delta=True, incr=True)
    shrink = request({"volumes": ["/data0:-1G"]})
    with pytest.raises(InvalidRequest, match="invalid size in usage"):
        set_capacity("test0", state, shrink, delta=True, incr=True)


# rm-disks

VDA = "/dev/vda:/:100:100:1G:1G"
VDB = "/dev/vdb:/data:100:100:1G:1G"


def with_two_disks() -> NodeState:
    return set_capacity("n", F4, request({"disks": [VDA, VDB]}), delta=False, incr=True)


def test_rm_disks_with_delta_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="invalid engine args"):
        set_capacity(
            "n", with_two_disks(), request({"rm-disks": "/dev/vdb"}), delta=True, incr=True
        )


def test_rm_disks_removes_them_and_scrubs_zero_usage() -> None:
    zeros = NodeResource(disks=[Disk(device="/dev/vda"), Disk(device="/dev/vdb")])
    state = set_usage("n", with_two_disks(), zeros, None, delta=True, incr=True)
    assert [d.device for d in state.usage.disks or ()] == ["/dev/vda", "/dev/vdb"]
    after = set_capacity("n", state, request({"rm-disks": "/dev/vdb"}), delta=False, incr=True)
    assert [d.device for d in after.capacity.disks or ()] == ["/dev/vda"]
    assert [d.device for d in after.usage.disks or ()] == ["/dev/vda"]
    assert after.capacity.volumes == F4.capacity.volumes  # nothing else changes


def test_rm_disks_of_a_disk_in_use_is_refused() -> None:
    state = with_two_disks()
    used = NodeResource(disks=[Disk(device="/dev/vdb").with_quota((10, 0, 0, 0))])
    state = set_usage("n", state, used, None, delta=True, incr=True)
    with pytest.raises(InvalidDiskQuota, match="/dev/vdb not found in capacity: invalid disk"):
        set_capacity("n", state, request({"rm-disks": "/dev/vdb"}), delta=False, incr=True)


def test_rm_disks_then_the_disks_given() -> None:
    given = request({"rm-disks": "/dev/vda,/dev/vdb", "disks": ["/dev/vdc:/:1:1:1:1"]})
    after = set_capacity("n", with_two_disks(), given, delta=False, incr=True)
    assert [d.device for d in after.capacity.disks or ()] == ["/dev/vdc"]


# core's rollback, which upstream got wrong (docs/differences.md)


@pytest.mark.parametrize(
    "change",
    [
        REQUEST,
        STORED,
        request({"volumes": ["/data0:2T"]}),
        request({"disks": [VDA], "storage": "1G"}),
        request({"rm-disks": "/dev/vdb"}),
    ],
)
@pytest.mark.parametrize("delta", [True, False])
def test_rollback_through_before_restores_the_capacity(change: Given, delta: bool) -> None:
    state = with_two_disks()
    if delta and isinstance(change, AskedResource) and change.rm_disks:
        return  # refused (test_rm_disks_with_delta_is_refused)
    changed = set_capacity("n", state, change, delta=delta, incr=True)
    before = msgspec.json.encode(state.capacity)  # what core got back and hands back
    rollback = node_request_of(msgspec.json.decode(before), "resource_request")
    once = set_capacity("n", changed, rollback, delta=False, incr=True)
    twice = set_capacity("n", once, rollback, delta=False, incr=True)
    assert once.capacity == twice.capacity == state.capacity


def test_rollback_of_an_empty_capacity() -> None:
    state = validated(NodeResource(storage=5), None)
    changed = set_capacity("n", state, REQUEST, delta=True, incr=True)
    rollback = node_request_of(msgspec.json.decode(msgspec.json.encode(state.capacity)), "r")
    restored = set_capacity("n", changed, rollback, delta=False, incr=True).capacity
    assert restored == state.capacity.filled()  # upstream's copy writes the nulls empty


# set-node-resource-usage


def test_upstream_usage_table() -> None:
    workloads = [WorkloadResource(storage_request=1), WorkloadResource(storage_limit=1)]
    state = F4
    steps: list[tuple[Given | None, list[WorkloadResource] | None, bool, bool, int]] = [
        (STORED, None, True, True, T),
        (STORED, None, True, False, 0),
        (REQUEST, None, True, True, 2 * T),
        (REQUEST, None, True, False, 0),
        (None, None, True, False, 0),
        (None, workloads, True, True, 1),
        (None, workloads, True, False, 0),
        (STORED, None, False, True, T),
    ]
    for given, held, delta, incr, storage in steps:
        state = set_usage("test0", state, given, held, delta=delta, incr=incr)
        assert state.usage.storage == storage
    assert state.usage.volumes == {"/data4": T}  # not in capacity, and accepted


def test_usage_input_priority() -> None:
    workloads = [WorkloadResource(storage_request=7)]
    assert set_usage("n", F4, REQUEST, workloads, delta=False, incr=True).usage.storage == 2 * T
    assert set_usage("n", F4, None, workloads, delta=False, incr=True).usage.storage == 7
    assert chosen(REQUEST, STORED) is REQUEST
    assert chosen(None, STORED) is STORED
    assert chosen(None, None) is None


def test_usage_with_nothing_given() -> None:
    used = set_usage("n", F4, STORED, None, delta=True, incr=True)
    assert set_usage("n", used, None, None, delta=True, incr=True) == used
    assert set_usage("n", used, None, None, delta=False, incr=True).usage == NodeResource(
        volumes={}, disks=[], storage=0
    )


def test_absolute_usage_forces_incr() -> None:
    assert set_usage("n", F4, STORED, None, delta=False, incr=False).usage.storage == T


def test_usage_rollback_through_before() -> None:
    used = set_usage("n", F4, REQUEST, None, delta=True, incr=True)
    again = set_usage("n", used, STORED, None, delta=True, incr=True)
    restored = set_usage("n", again, used.usage, None, delta=False, incr=True)
    assert restored == used


def test_usage_from_workloads() -> None:
    workload = WorkloadResource(
        volume_plan_request={"AUTO:/x:rw:1:0:0:0:0": {"/data0": G}},
        storage_request=G,
        disks_request=[Disk(device="", mounts=None)],
    )
    state = set_usage("n", F4, None, [workload, None, workload], delta=True, incr=True)
    assert state.usage.volumes == {"/data0": 2 * G, "/data1": 0, "/data2": 0, "/data3": 0}
    assert state.usage.storage == 2 * G
    assert state.usage.disks == []  # F4 has no disks; the "" entry is scrubbed


def test_usage_past_a_volume_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="invalid size in usage"):
        set_usage("n", F4, request({"volumes": ["/data0:2T"]}), None, delta=True, incr=True)
    with pytest.raises(InvalidRequest, match="invalid size in usage"):
        set_usage("n", F4, request({"volumes": ["/data0:1G"]}), None, delta=True, incr=False)


def test_usage_ignores_rm_disks() -> None:
    state = with_two_disks()
    after = set_usage("n", state, request({"rm-disks": "/dev/vda"}), None, delta=True, incr=True)
    assert after.capacity == state.capacity


@FAST
@hypothesis.given(
    st.lists(st.tuples(st.sampled_from(["/data0", "/data1"]), st.integers(0, T)), max_size=5)
)
def test_usage_delta_then_its_inverse_restores_usage(changes: list[tuple[str, int]]) -> None:
    state = F4
    for path, size in changes:
        given = NodeResource(volumes={path: size // 8}, storage=size)
        state = set_usage("n", state, given, None, delta=True, incr=True)
    for path, size in reversed(changes):
        given = NodeResource(volumes={path: size // 8}, storage=size)
        state = set_usage("n", state, given, None, delta=True, incr=False)
    assert state.capacity == F4.capacity
    assert state.usage.volumes == F4.usage.volumes
    assert state.usage.storage == 0


# set-node-resource-info (an upstream bug, fixed: docs/differences.md)


def test_set_info_stores_storage_as_given() -> None:
    """Upstream read back 2 T (the volumes counted twice); ours stores 1 T."""
    usage = NodeResource(volumes={"/data3": T}, storage=4 * T)
    state = set_info(STORED, usage)
    assert state.capacity.storage == T
    assert state.usage.storage == 4 * T  # above capacity, accepted


def test_set_info_null_usage_is_empty() -> None:
    assert set_info(STORED, None).usage == NodeResource()


def test_set_info_needs_a_capacity() -> None:
    with pytest.raises(InvalidRequest, match="invalid capacity"):
        set_info(None, None)


def test_set_info_checks_the_rules() -> None:
    with pytest.raises(InvalidRequest, match="invalid size in usage"):
        set_info(STORED, NodeResource(volumes={"/data4": 2 * T}))


def in_use(path: str = "/data0", used: int = G) -> NodeState:
    return set_usage("n", F4, NodeResource(volumes={path: used}), None, delta=True, incr=True)


@pytest.mark.parametrize(
    ("given", "delta"),
    [
        (request({"volumes": ["/data0:-1T"]}), True),
        (request({"volumes": ["/data1:1T", "/data2:1T", "/data3:1T"]}), False),
        (NodeResource(volumes={"/data1": T}, storage=T), False),
    ],
    ids=["a delta to exactly 0", "a replace that leaves it out", "a stored-form replace"],
)
def test_a_volume_in_use_cannot_be_removed(given: Given, delta: bool) -> None:
    with pytest.raises(InvalidRequest, match=rf"volume /data0 is in use \({G} bytes\)"):
        set_capacity("n", in_use(), given, delta=delta, incr=True)


def test_a_volume_with_nothing_in_use_can_be_removed() -> None:
    after = set_capacity(
        "n", in_use("/data1"), request({"volumes": ["/data0:-1T"]}), delta=True, incr=True
    )
    assert sorted(after.capacity.volumes or ()) == ["/data1", "/data2", "/data3"]
