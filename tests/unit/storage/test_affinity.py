"""Realloc placement with affinity: projections/storage/placement/affinity.py.

Upstream's GetAffinityPlan table with exact plans. The old workload: dir0 (100 G, IOPS
100/100/100M/100M) on d0, the monopoly dir1 (100 G) holding all of d2, and the unlimited dir2
on d0, charged to S's usage. Each request is merged into the old bindings first, as realloc
does.
"""

from __future__ import annotations

import pytest

from resource_extend.ledger.model.errors import NotEnoughResource
from resource_extend.projections.storage.grammar.bindings import Binding, InvalidVolume, merge
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.placement.affinity import affinity_plan
from resource_extend.projections.storage.placement.schedule import Plan
from resource_extend.projections.storage.wire.resources import NodeResource, VolumePlan
from tests.unit.storage import reference
from tests.unit.storage.schedule_fixtures import (
    S_CAPACITY,
    G,
    M,
    T,
    bindings,
    placements,
)

OLD = bindings("AUTO:/dir0:rw:100G:100:100:100M:100M", "AUTO:/dir1:mrw:100G", "AUTO:/dir2:rw:0")
OLD_PLAN: VolumePlan = {
    OLD[0].canonical(): {"/data0": 100 * G},
    OLD[1].canonical(): {"/data2": T},
    OLD[2].canonical(): {"/data0": 0},
}
OLD_IOPS = (100, 100, 100 * M, 100 * M)
OLD_DISKS = [Disk(device="/dev/vda", mounts=["/", "/data"]).with_quota(OLD_IOPS)]
"""The old workload's disks_request: dir0's quota, charged to vda."""
USAGE = NodeResource(
    volumes={"/data0": 300 * G, "/data1": 300 * G, "/data2": T, "/data3": 0},
    disks=[
        Disk(device="/dev/vda", mounts=["/", "/data"]).with_quota(OLD_IOPS),
        Disk(device="/dev/vdb", mounts=["/data1"]),
    ],
)
KEPT_DIR0 = {"/dir0": ("/data0", 100 * G), "/dir2": ("/data0", 0)}
VDA_DIR0 = {"/dev/vda": OLD_IOPS}


def realloc(*texts: str) -> Plan:
    merged = merge(bindings(*texts), OLD)
    found = affinity_plan(S_CAPACITY, USAGE, merged, OLD_PLAN, OLD_DISKS)
    assert (found.volumes, found.disks) == reference.affinity_plan(
        S_CAPACITY, USAGE, merged, OLD_PLAN, OLD
    )
    return found


def test_a_kept_binding_grows_in_place() -> None:
    found = realloc("AUTO:/dir0:rw:1G")
    assert placements(found) == {
        "/dir0": ("/data0", 101 * G),
        "/dir1": ("/data2", T),
        "/dir2": ("/data0", 0),
    }
    assert found.disks == VDA_DIR0


def test_a_new_binding_is_scheduled_best_fit() -> None:
    found = realloc("AUTO:/dir3:rw:1G")
    assert placements(found) == {**KEPT_DIR0, "/dir1": ("/data2", T), "/dir3": ("/data0", G)}


def test_a_grown_monopoly_binding_still_takes_its_whole_volume() -> None:
    found = realloc("AUTO:/dir1:rwm:1G")
    assert placements(found) == {**KEPT_DIR0, "/dir1": ("/data2", T)}
    assert found.volumes["AUTO:/dir1:mrw:108447924224:0:0:0:0"] == {"/data2": T}


def test_a_new_monopoly_member_joins_the_group_on_its_volume() -> None:
    found = realloc("AUTO:/dir1:rwm:1G", "AUTO:/dir3:rwm:1G")
    assert placements(found) == {
        **KEPT_DIR0,
        "/dir1": ("/data2", 1088732102013),
        "/dir3": ("/data2", 10779525763),
    }


def test_a_new_group_goes_to_an_unused_volume_never_the_one_it_frees() -> None:
    # dir1 merges below zero and is dropped; d2 is given back but stays in the used list.
    found = realloc("AUTO:/dir1:rwm:-1TiB", "AUTO:/dir3:rwm:100G", "AUTO:/dir4:rwm:100G")
    assert placements(found) == {
        **KEPT_DIR0,
        "/dir3": ("/data3", T // 2),
        "/dir4": ("/data3", T // 2),
    }


def test_a_binding_shrunk_to_zero_with_quota_stays_normal() -> None:
    found = realloc("AUTO:/dir0:rw:-100GiB")
    assert placements(found) == {**KEPT_DIR0, "/dir0": ("/data0", 0), "/dir1": ("/data2", T)}
    assert found.disks == VDA_DIR0


def test_an_unlimited_binding_grown_becomes_normal_on_its_old_path() -> None:
    found = realloc("AUTO:/dir0:rw:-100G", "AUTO:/dir2:rw:100G", "AUTO:/dir3:rwm:100G")
    assert placements(found) == {
        "/dir0": ("/data0", 0),
        "/dir2": ("/data0", 100 * G),
        "/dir1": ("/data2", T // 2),
        "/dir3": ("/data2", T // 2),
    }


def test_an_empty_request_gives_the_old_plan() -> None:
    found = realloc()
    assert found.volumes == OLD_PLAN
    assert found.disks == VDA_DIR0


@pytest.mark.parametrize(
    ("texts", "reason"),
    [
        (["AUTO:/dir0:rw:1TiB"], "no space to expand: /data0 has 884763262976 bytes left"),
        (["AUTO:/dir1:rwm:1TiB"], "no space to expand: the group on /data2"),
        (["AUTO:/dir3:rw:1T", "AUTO:/dir4:rw:1T"], "no plan for"),
        (["AUTO:/dir0:rw:0:901"], "no IOPS quota to expand: /data0"),
    ],
)
def test_what_does_not_fit(texts: list[str], reason: str) -> None:
    merged = merge(bindings(*texts), OLD)
    with pytest.raises(NotEnoughResource, match=reason):
        affinity_plan(S_CAPACITY, USAGE, merged, OLD_PLAN, OLD_DISKS)
    with pytest.raises(reference.Failed):
        reference.affinity_plan(S_CAPACITY, USAGE, merged, OLD_PLAN, OLD)


def test_affinity_plan_2_a_new_binding_finds_no_room() -> None:
    """Upstream's TestAffinityPlan2: d2 and d3 are full and the old plan is not in usage."""
    usage = NodeResource(volumes={"/data0": 200 * G, "/data1": 300 * G, "/data2": T, "/data3": T})
    merged = merge(bindings("AUTO:/dir0:rw:800G", "AUTO:/dir10:rw:800G"), OLD)
    with pytest.raises(NotEnoughResource):
        affinity_plan(S_CAPACITY, usage, merged, OLD_PLAN, OLD_DISKS)


def test_nothing_to_schedule_is_an_empty_plan() -> None:
    merged = bindings("/src:/dst")
    assert affinity_plan(S_CAPACITY, USAGE, merged, OLD_PLAN, OLD_DISKS) == Plan(
        volumes={}, disks={}
    )


DATA_ONLY = NodeResource(
    volumes={"/data/a": 10 * G},
    disks=[Disk(device="/dev/vdc", mounts=["/data"]).with_quota((200, 100, 0, 0))],
)


def test_quota_goes_back_to_the_device_charged_not_the_one_serving_the_path_now() -> None:
    """After a remount /data/a is served by vdd; the workload's 100 read IOPS were charged to
    vdc (its disks_request). They go back to vdc: vdd, with 50 left, cannot take the 100 the
    merged binding needs (upstream gave them back to vdd, and the plan passed)."""
    remounted = NodeResource(
        volumes={"/data/a": 10 * G},
        disks=[
            Disk(device="/dev/vdc", mounts=["/other"]).with_quota((200, 0, 0, 0)),
            Disk(device="/dev/vdd", mounts=["/data"]).with_quota((150, 0, 0, 0)),
        ],
    )
    usage = NodeResource(
        volumes={"/data/a": G},
        disks=[
            Disk(device="/dev/vdc").with_quota((100, 0, 0, 0)),
            Disk(device="/dev/vdd").with_quota((100, 0, 0, 0)),
        ],
    )
    old = bindings("AUTO:/a:rw:1G:100")
    old_plan: VolumePlan = {old[0].canonical(): {"/data/a": G}}
    charged = [Disk(device="/dev/vdc").with_quota((100, 0, 0, 0))]
    grown = merge(bindings("AUTO:/a:rw:1G"), old)
    with pytest.raises(NotEnoughResource, match="no IOPS quota to expand"):
        affinity_plan(remounted, usage, grown, old_plan, charged)
    shrunk = merge(bindings("AUTO:/a:rw:0:-60"), old)
    found = affinity_plan(remounted, usage, shrunk, old_plan, charged)
    assert found.disks == {"/dev/vdd": (40, 0, 0, 0)}


def test_old_quota_on_a_device_the_node_lacks_is_not_given_back() -> None:
    gone = [Disk(device="/dev/gone").with_quota((100, 0, 0, 0))]
    found = affinity_plan(DATA_ONLY, NodeResource(), bindings("AUTO:/a:rw:1G"), {}, gone)
    assert found.disks == {"/dev/vdc": (0, 0, 0, 0)}  # the new binding's zero entry, no more


def test_old_plan_paths_the_node_lacks_are_invalid() -> None:
    old_plan = {"AUTO:/a:rw:1:0:0:0:0": {"/gone": 1}}
    with pytest.raises(InvalidVolume, match="volume /gone not found"):
        affinity_plan(DATA_ONLY, NodeResource(), bindings("AUTO:/a:rw:1"), old_plan, [])


def test_old_mount_quota_is_given_back_before_the_new_one_is_charged() -> None:
    """The disk has 100 of its 200 read IOPS left besides the old mount's 100; the merged
    mount needs 150, which fits only once the old 100 are given back."""
    old = bindings("/data/x:/x:rw:0:100")
    usage = NodeResource(
        volumes={"/data/a": 0}, disks=[Disk(device="/dev/vdc").with_quota((100, 0, 0, 0))]
    )
    merged: list[Binding] = merge(bindings("/data/x:/x:rw:0:50"), old)
    charged = [Disk(device="/dev/vdc").with_quota((100, 0, 0, 0))]
    found = affinity_plan(DATA_ONLY, usage, merged, {}, charged)
    assert found == Plan(volumes={}, disks={"/dev/vdc": (150, 0, 0, 0)})
    assert reference.affinity_plan(DATA_ONLY, usage, merged, {}, old) == ({}, found.disks)
