"""The placement algorithm: projections/storage/placement/schedule.py, normal.py, host.py.

Each upstream schedule-test row with its exact plans, the checks upstream makes on every
answer, resource-extend's divergence and quota-free-disk tests, and the details the
bounded scheduler must keep: the scratch-state coupling, unlimited placement after every
plan, and the bound.
"""

from __future__ import annotations

import pytest

from resource_extend.projections.storage.grammar.bindings import InvalidVolume
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.placement.monopoly import shares
from resource_extend.projections.storage.placement.schedule import Plan, plan_count, volume_plans
from resource_extend.projections.storage.placement.scheduler_view import (
    build_host,
    classify,
    go_search,
)
from resource_extend.projections.storage.wire.resources import NodeResource
from tests.unit.storage import reference
from tests.unit.storage.schedule_fixtures import (
    S_CAPACITY,
    S_USAGE,
    G,
    M,
    T,
    applied,
    bindings,
    placements,
    usage_is_valid,
)

D0, D1, D2, D3 = "/data0", "/data1", "/data2", "/data3"
THIRD = T // 3  # 366503875925: a 1 TiB volume split three ways


def plans_on_s(*texts: str, bound: int = 1000) -> list[Plan]:
    return volume_plans(S_CAPACITY, S_USAGE, bindings(*texts), bound)


def where(plans: list[Plan]) -> list[dict[str, tuple[str, int]]]:
    return [placements(plan) for plan in plans]


# --- upstream's schedule tests: every row, with its exact plans ----------------------------------


def test_a_node_without_volumes_has_no_plan() -> None:
    bare = NodeResource(volumes={}, disks=[VDA_ONLY], storage=T)
    assert volume_plans(bare, NodeResource(), bindings("AUTO:/dir1:rw:500GiB"), 1000) == []


VDA_ONLY = Disk(device="/dev/vda", mounts=["/"]).with_quota((1000, 1000, G, G))


def test_one_normal_binding_fills_used_volumes_then_promotes_unused_ones() -> None:
    # best fit: d1 (724 G free) before d0 (824 G); then d2 and d3 are promoted in turn
    # (normalCap 2 -> 4 -> 6), each taking two copies.
    size = 500 * G
    assert where(plans_on_s("AUTO:/dir1:rw:500GiB")) == [
        {"/dir1": (path, size)} for path in (D1, D0, D2, D2, D3, D3)
    ]


def test_two_normal_bindings_per_copy() -> None:
    size = 500 * G
    assert where(plans_on_s("AUTO:/dir1:rw:500GiB", "AUTO:/dir2:rw:500GiB")) == [
        {"/dir1": (D1, size), "/dir2": (D0, size)},
        {"/dir1": (D2, size), "/dir2": (D2, size)},
        {"/dir1": (D3, size), "/dir2": (D3, size)},
    ]


def test_monopoly_takes_whole_unused_volumes_and_decides_the_count() -> None:
    # normalCap is 1548 (1 GiB copies on d1 and d0), monoCap 2: no promotion.
    assert where(plans_on_s("AUTO:/dir1:rw:1G", "AUTO:/dir2:rwm:1G")) == [
        {"/dir1": (D1, G), "/dir2": (D2, T)},
        {"/dir1": (D1, G), "/dir2": (D3, T)},
    ]


def test_a_monopoly_group_splits_its_volume_with_the_remainder_to_the_first() -> None:
    # d2 is promoted for the normal bindings, which leaves d3 to the group; T / 3 leaves 1 B,
    # which goes to the smallest binding, ties by canonical string: dir3.
    assert where(
        plans_on_s(
            "AUTO:/dir1:rw:500GiB",
            "AUTO:/dir2:rw:500GiB",
            "AUTO:/dir3:rwm:100G",
            "AUTO:/dir4:rwm:100G",
            "AUTO:/dir5:rwm:100G",
        )
    ) == [
        {
            "/dir1": (D1, 500 * G),
            "/dir2": (D0, 500 * G),
            "/dir3": (D3, THIRD + 1),
            "/dir4": (D3, THIRD),
            "/dir5": (D3, THIRD),
        }
    ]


def test_unlimited_goes_to_the_largest_volume_left_after_all_plans() -> None:
    # after both normal copies (d1, d0) and both monopoly plans (d2, d3): d1 224 G, d0 324 G.
    assert where(
        plans_on_s(
            "AUTO:/dir1:rw:500GiB",
            "AUTO:/dir2:rw:0",
            "AUTO:/dir3:rwm:100G",
            "AUTO:/dir4:rwm:100G",
            "AUTO:/dir5:rwm:100G",
        )
    ) == [
        {
            "/dir1": (D1, 500 * G),
            "/dir2": (D0, 0),
            "/dir3": (D2, THIRD + 1),
            "/dir4": (D2, THIRD),
            "/dir5": (D2, THIRD),
        },
        {
            "/dir1": (D0, 500 * G),
            "/dir2": (D0, 0),
            "/dir3": (D3, THIRD + 1),
            "/dir4": (D3, THIRD),
            "/dir5": (D3, THIRD),
        },
    ]


@pytest.mark.parametrize("text", ["AUTO:/dir1:rw:0", ":/dir1:rw"])
def test_unlimited_alone_gives_bound_plans_on_the_first_largest_volume(text: str) -> None:
    found = plans_on_s(text)
    assert len(found) == 1000
    assert all(placements(plan) == {"/dir1": (D2, 0)} for plan in found)
    assert all(plan.disks == {} for plan in found)


@pytest.mark.parametrize(
    "texts",
    [
        ["AUTO:/dir1:rw:2TiB"],
        [f"AUTO:/dir{i}:rw:800GiB" for i in range(7)],
        [f"AUTO:/dir{i}:rwm:500GiB" for i in range(3)],
        [f"AUTO:/n{i}:rw:800G" for i in range(4)] + ["AUTO:/m0:rwm:500G", "AUTO:/m1:rwm:500G"],
        ["AUTO:/dir1:rw:500GiB:500:100:100M:100M", ":/dir2:rw:500GiB:100:100:100M:10000M"],
    ],
)
def test_requests_that_do_not_fit(texts: list[str]) -> None:
    assert plans_on_s(*texts) == []


def test_quota_bindings_share_vda_and_an_empty_source_is_scheduled() -> None:
    """The model put dir1 on d0 and dir2 on d2: it placed the two equal sizes in the
    test's input order. Requests reach the scheduler sorted by canonical string (as
    upstream's Validate sorts them), and ``:/dir2`` sorts before ``AUTO:/dir1``, so dir2 is
    placed first. The count and the disk plan are the same; then vda has 400 read IOPS left,
    short of dir1's 500."""
    found = plans_on_s(
        "AUTO:/dir1:rw:500GiB:500:100:100M:100M", ":/dir2:rw:500GiB:100:100:100M:100M"
    )
    assert where(found) == [{"/dir1": (D2, 500 * G), "/dir2": (D0, 500 * G)}]
    assert found[0].disks == {"/dev/vda": (600, 200, 200 * M, 200 * M)}


# --- upstream's checks on every answer -----------------------------------------------

ROWS = [
    ["AUTO:/dir1:rw:500GiB"],
    ["AUTO:/dir1:rw:500GiB", "AUTO:/dir2:rw:500GiB"],
    ["AUTO:/dir1:rw:1G", "AUTO:/dir2:rwm:1G"],
    ["AUTO:/a:rw:500GiB", "AUTO:/b:rw:500GiB", "AUTO:/c:rwm:100G", "AUTO:/d:rwm:100G"],
    ["AUTO:/a:rw:500GiB", "AUTO:/b:rw:0", "AUTO:/c:rwm:100G", "AUTO:/d:rwm:100G"],
    ["AUTO:/dir1:rw:500GiB:500:100:100M:100M", ":/dir2:rw:500GiB:100:100:100M:100M"],
    ["AUTO:/dir1:rw:100GiB", "AUTO:/dir2:rwm:1GiB", "/mnt/data:/dir3:rw"],
    ["AUTO:/dir1:rw:10G:10:0:0:0", "/data1/x:/mnt:rw:0:0:0:1M:0"],
]


@pytest.mark.parametrize("texts", ROWS)
def test_upstream_properties(texts: list[str]) -> None:
    request = bindings(*texts)
    found = plans_on_s(*texts)
    assert found
    for plan in found:
        assert set(plan.volumes) == {b.canonical() for b in request if b.scheduled}
        for binding in request:
            if binding.normal or binding.unlimited:
                ((_, size),) = plan.volumes[binding.canonical()].items()
                assert size == binding.size
        mono = [plan.volumes[b.canonical()] for b in request if b.monopoly]
        if mono:
            (path,) = {p for placed in mono for p in placed}
            assert sum(size for placed in mono for size in placed.values()) == T
            assert S_USAGE.volumes is not None and S_USAGE.volumes[path] == 0
    after = applied(S_USAGE, found)
    assert usage_is_valid(S_CAPACITY, after)
    assert volume_plans(S_CAPACITY, after, request, 1000) == []


@pytest.mark.parametrize("texts", [*ROWS, ["AUTO:/dir1:rw:0"], ["AUTO:/x:rw:1G"]])
@pytest.mark.parametrize("bound", [1, 3, 1000])
def test_rows_equal_the_unbounded_reference(texts: list[str], bound: int) -> None:
    request = bindings(*texts)
    found = volume_plans(S_CAPACITY, S_USAGE, request, bound)
    assert [(p.volumes, p.disks) for p in found] == reference.volume_plans(
        S_CAPACITY, S_USAGE, request, bound
    )
    assert plan_count(S_CAPACITY, S_USAGE, request, bound) == len(found)


# --- resource-extend's tests ----------------------------------------------------------------------


def test_disk_plans_list_upstreams_zero_entries() -> None:
    """resource-extend's SkipQuotaFreeDisks is not followed: upstream lists a zero entry for
    the disk of each normal binding (/data1: vdb), of the mount (/mnt/data: vda) and of the
    monopoly volume (/data2: vda), and core keeps them."""
    found = plans_on_s("AUTO:/dir1:rw:100GiB", "AUTO:/dir2:rwm:1GiB", "/mnt/data:/dir3:rw")
    assert found
    assert all(plan.disks == {"/dev/vda": (0, 0, 0, 0), "/dev/vdb": (0, 0, 0, 0)} for plan in found)


def test_a_path_no_disk_covers_charges_an_empty_device() -> None:
    """Upstream's entry for it has device "" (and mounts null): it charges nothing."""
    node = NodeResource(volumes={"/x": 10 * G}, disks=[], storage=10 * G)
    found = volume_plans(node, NodeResource(volumes={"/x": 1}), bindings("AUTO:/a:rw:1G"), 5)
    assert len(found) == 5
    assert all(plan.disks == {"": (0, 0, 0, 0)} for plan in found)
    assert volume_plans(node, NodeResource(volumes={"/x": 1}), bindings("AUTO:/a:rw:1G:1"), 5) == []


HUGE = 2**50
DIVERGENCE = NodeResource(
    volumes={
        "/dataA": 40 * G,
        "/v1": 11 * G,
        "/v2": 12 * G,
        "/v3": 100 * G,
        "/v4": 100 * G,
        "/v5": 100 * G,
    },
    disks=[
        Disk(device="/dev/a", mounts=["/dataA"]).with_quota((HUGE, HUGE, HUGE, HUGE)),
        Disk(device="/dev/b", mounts=["/mnt/shared", "/v2"]).with_quota((100, HUGE, HUGE, HUGE)),
        Disk(device="/dev/c", mounts=["/v1", "/v3", "/v4", "/v5"]).with_quota(
            (HUGE, HUGE, HUGE, HUGE)
        ),
    ],
)
DIVERGENCE_USAGE = NodeResource(
    volumes={"/dataA": 10 * G, "/v1": 0, "/v2": 0, "/v3": 0, "/v4": 0, "/v5": 0}, disks=[]
)


@pytest.mark.parametrize("bound", [1, 4, 100])
def test_divergence_fixture_keeps_upstreams_count(bound: int) -> None:
    """A monopoly group and a normal binding share disk quota, so the capacity is not monotone
    in the promotions: the loop must stop where upstream's does. The count, 4, is the monopoly
    side's and is not capped by the bound (upstream; resource-extend caps it)."""
    request = bindings(
        "AUTO:/n:rw:10GiB:85:0:0:0", "AUTO:/o:rwm:10GiB", "/mnt/shared/x:/mm:rw:0:10:0:0:0"
    )
    found = volume_plans(DIVERGENCE, DIVERGENCE_USAGE, request, bound)
    assert [(p.volumes, p.disks) for p in found] == reference.volume_plans(
        DIVERGENCE, DIVERGENCE_USAGE, request, bound
    )
    assert len(found) == plan_count(DIVERGENCE, DIVERGENCE_USAGE, request, bound) == 4
    assert where(found)[0] == {"/n": ("/v1", 10 * G), "/o": ("/v2", 12 * G)}
    assert found[0].disks == {"/dev/b": (10, 0, 0, 0), "/dev/c": (85, 0, 0, 0)}


# --- what the bounded scheduler must keep ----------------------------------------------------


def two_used(*free: int) -> tuple[NodeResource, NodeResource]:
    paths = [f"/v{i}" for i in range(len(free))]
    capacity = NodeResource(volumes={p: 1000 for p in paths})
    return capacity, NodeResource(volumes={p: 1000 - f for p, f in zip(paths, free, strict=True)})


def test_unlimited_placement_counts_plans_past_the_bound() -> None:
    """Normal copies of 10 fill /v1 (65: 6 copies, 5 left) and then /v0 (100: 10 copies, 0
    left). Only 3 plans are returned, but the unlimited binding goes where upstream's full
    enumeration leaves the most: /v1, not /v0 (which the first 3 plans leave untouched)."""
    capacity, usage = two_used(100, 65)
    found = volume_plans(capacity, usage, bindings("AUTO:/n:rw:10", "AUTO:/u:rw:0"), 3)
    assert where(found) == [{"/n": ("/v1", 10), "/u": ("/v1", 0)}] * 3


def test_a_volume_falling_faster_overtakes_a_bindings_choice() -> None:
    """/n0 (1 B) goes to the smallest volume that holds it, /n1 (11 B) to the smallest whose
    disk has its quota. From pass 9 /n0 fills /a2 (20 B left) and /n1 fills /b0 (37 B), which
    falls faster: at pass 11 /b0 is below /a2 and /n0 follows it there. A run of identical
    passes must end exactly where upstream's passes change."""
    disk_a = Disk(device="A", mounts=["/a2", "/a4"]).with_quota((56, 6, 0, 0))
    disk_b = Disk(device="B", mounts=["/b0", "/b1", "/b3"]).with_quota((23, 49, 0, 0))
    free = {"/b0": 59, "/b1": 59, "/a2": 53, "/b3": 41, "/a4": 60}
    capacity = NodeResource(volumes={p: 100 for p in free}, disks=[disk_a, disk_b])
    usage = NodeResource(volumes={p: 100 - f for p, f in free.items()})
    request = bindings("AUTO:/n0:rw:1", "AUTO:/n1:rw:11:1:2", "AUTO:/u:rw:0")
    found = volume_plans(capacity, usage, request, 1000)
    assert [(p.volumes, p.disks) for p in found] == reference.volume_plans(
        capacity, usage, request, 1000
    )
    assert [placements(plan)["/n0"][0] for plan in found[8:12]] == ["/a2", "/a2", "/b0", "/b0"]
    assert len(found) == 16


def test_a_failed_pass_keeps_its_quota_from_the_monopoly_step() -> None:
    """Pass 1 puts both normal bindings on /u (3 read IOPS); pass 2 places the first (3 more)
    and fails on the second. Those 3 stay charged in the scratch state: 4 read IOPS are left
    on the disk, short of the monopoly group's 5, so no copy fits at all."""
    disk = Disk(device="/dev/d", mounts=["/"]).with_quota((10, 0, 0, 0))
    capacity = NodeResource(volumes={"/u": 100, "/v": 50}, disks=[disk])
    usage = NodeResource(volumes={"/u": 1, "/v": 0}, disks=[Disk(device="/dev/d")])
    request = bindings("AUTO:/a:rw:1:3", "AUTO:/b:rw:60", "AUTO:/m:rwm:10:5")
    assert volume_plans(capacity, usage, request, 10) == []
    assert reference.volume_plans(capacity, usage, request, 10) == []
    # Without the failed pass's charge (a 4-read-IOPS monopoly group), one copy fits.
    lighter = bindings("AUTO:/a:rw:1:3", "AUTO:/b:rw:60", "AUTO:/m:rwm:10:4")
    assert len(volume_plans(capacity, usage, lighter, 10)) == 1


def test_monopoly_plans_are_capped_by_the_bound_only_without_normal_bindings() -> None:
    """With normal bindings, their enumeration is not bounded (upstream), so the monopoly
    side decides; without, the normal side is the ``bound`` placeholder."""
    capacity = NodeResource(volumes={"/used": 100, **{f"/v{i}": 10 for i in range(5)}})
    usage = NodeResource(volumes={"/used": 1})
    assert len(volume_plans(capacity, usage, bindings("AUTO:/n:rw:1", "AUTO:/m:rwm:5"), 2)) == 5
    assert len(volume_plans(capacity, usage, bindings("AUTO:/m:rwm:5"), 2)) == 2


@pytest.mark.parametrize("bound", [1, 1000, 1548, 2000, 2572, 3000, 5000])
def test_one_binding_counts_in_closed_form(bound: int) -> None:
    """1 GiB copies: 724 + 824 on the used volumes (the ~1.5 k passes upstream makes one by
    one), then 1024 per promoted unused volume while that is still short of the bound."""
    assert plan_count(S_CAPACITY, S_USAGE, bindings("AUTO:/x:rw:1G"), bound) == min(bound, 3596)


def test_nothing_to_schedule_gives_bound_empty_plans() -> None:
    found = plans_on_s("/src:/dst", "/a:/b:ro")
    assert found == [Plan(volumes={}, disks={})] * 1000


def test_mount_quota_alone_counts_passes() -> None:
    # vdb serves /data1 with 1 GiB/s read BPS: 1024 copies of 1 MiB/s, capped by the bound.
    found = plans_on_s("/data1/x:/m:rw:0:0:0:1M:0", bound=2000)
    assert len(found) == 1024
    assert found[0] == Plan(volumes={}, disks={"/dev/vdb": (0, 0, M, 0)})


def test_negative_normal_sizes_are_refused() -> None:
    """Upstream would grow the volume on every pass and never stop."""
    with pytest.raises(InvalidVolume, match="negative"):
        plans_on_s("AUTO:/x:rw:-1G")


def test_classes_are_ordered_by_size_then_canonical_string() -> None:
    request = bindings(
        "AUTO:/b:rw:2", "AUTO:/a:rw:2", ":/c:rw:1", "AUTO:/m2:rwm:3", "AUTO:/m1:rwm:3"
    )
    classes = classify(list(reversed(request)))
    assert [b.destination for b in classes.normal] == ["/c", "/a", "/b"]
    assert [b.destination for b in classes.mono] == ["/m1", "/m2"]
    assert classes.mono_size == 6


def test_shares_split_in_float64_with_the_remainder_to_the_first() -> None:
    group = bindings("AUTO:/a:rwm:1G", "AUTO:/b:rwm:101G")
    assert shares(group, T) == [10779525763, 1088732102013]
    assert shares(bindings("AUTO:/a:rwm:1", "AUTO:/b:rwm:1", "AUTO:/c:rwm:1"), 10) == [4, 3, 3]
    assert sum(shares(group, 12345678901)) == 12345678901


def test_host_sees_usage_exactly_zero_as_unused() -> None:
    capacity = NodeResource(volumes={"/a": 10, "/b": 10, "/c": 5, "/d": 7})
    host = build_host(capacity, NodeResource(volumes={"/a": 3, "/b": 0, "/e": 4}))
    assert host.used == ["/a"]
    assert host.unused == ["/c", "/d", "/b"]  # a path missing from usage counts as usage 0
    assert host.free == {"/a": 7, "/b": 10, "/c": 5, "/d": 7}


def test_go_search_bisects_like_go() -> None:
    assert go_search(5, lambda i: i >= 3) == 3
    assert go_search(5, lambda i: False) == 5
    # not monotone: the bisection looks at 2, 4 and 3 only, and never finds 1
    assert go_search(5, lambda i: i == 1) == 5
