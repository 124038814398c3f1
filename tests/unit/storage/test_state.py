"""The write guard (every write's check of volumes and disk quota, inside its compare-and-swap)
and the arithmetic of node resources."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.ledger.model.errors import InvalidRequest, NodeNotFound
from resource_extend.projections.storage.arithmetic import (
    add,
    subtract,
    volume_total,
    without_empty_volumes,
    workloads_usage,
)
from resource_extend.projections.storage.grammar.bindings import InvalidVolume
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.grammar.sizes import MAX_SIZE
from resource_extend.projections.storage.state import (
    InvalidDiskQuota,
    NodeState,
    existing,
    validated,
    zero_usage,
)
from resource_extend.projections.storage.wire.requests import InvalidStorage
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource
from tests.unit.strategies import FAST

G, T = 2**30, 2**40
VDA = Disk(device="/dev/vda", mounts=["/"]).with_quota((100, 100, 100, 100))
VDB = Disk(device="/dev/vdb", mounts=["/data"]).with_quota((100, 100, 100, 100))
CAPACITY = NodeResource(volumes={"/data0": G}, disks=[VDA], storage=G)


def disk(device: str, *quota: int, mounts: list[str] | None = None) -> Disk:
    """A disk with the quota given, the fields left out being 0."""
    return Disk(device=device, mounts=mounts).with_quota((*quota, 0, 0, 0, 0)[:4])


def test_missing_usage_is_filled_with_zeros() -> None:
    state = validated(CAPACITY, None)
    assert state.usage == NodeResource(
        volumes={"/data0": 0}, disks=[disk("/dev/vda", 0, 0, 0, 0, mounts=["/"])], storage=0
    )
    assert state.capacity == CAPACITY


def test_zero_usage_without_disks_has_empty_disks_as_upstreams_validation_makes() -> None:
    assert zero_usage(NodeResource(storage=5)) == NodeResource(volumes={}, disks=[])
    assert msgspec.json.encode(zero_usage(NodeResource(storage=5))) == (
        b'{"volumes":{},"disks":[],"storage":0}'
    )


def test_missing_capacity() -> None:
    with pytest.raises(InvalidRequest) as caught:
        validated(None, None)
    assert caught.value.reason == "invalid capacity"


def test_disks_are_sorted_and_usage_takes_capacity_mounts() -> None:
    capacity = NodeResource(disks=[VDB, VDA])
    usage = NodeResource(disks=[disk("/dev/vdb", 1, 1, 1, 1, mounts=["/old"]), disk("/dev/vda")])
    state = validated(capacity, usage)
    assert [d.device for d in state.capacity.disks or ()] == ["/dev/vda", "/dev/vdb"]
    assert state.usage.disks == [
        disk("/dev/vda", 0, 0, 0, 0, mounts=["/"]),
        disk("/dev/vdb", 1, 1, 1, 1, mounts=["/data"]),
    ]


def test_volume_maps_come_sorted() -> None:
    state = validated(NodeResource(volumes={"/b": 1, "/a": 1}), NodeResource(volumes={"/b": 0}))
    assert list(state.capacity.volumes or ()) == ["/a", "/b"]


def test_usage_exactly_zero_stays_apart_from_absent() -> None:
    """The scheduler treats a volume whose usage is exactly 0 as unused."""
    capacity = NodeResource(volumes={"/a": G, "/b": G})
    state = validated(capacity, NodeResource(volumes={"/a": 0}))
    assert state.usage.volumes == {"/a": 0}


def test_usage_above_a_volume_is_invalid_volume() -> None:
    """node_test: usage 2 G on a 1 G volume."""
    with pytest.raises(InvalidVolume) as caught:
        validated(CAPACITY, NodeResource(volumes={"/data0": 2 * G}))
    assert caught.value.reason.startswith("invalid size in usage")
    assert caught.value.reason.endswith(": invalid volume")


@pytest.mark.parametrize(
    ("capacity", "usage", "rule"),
    [
        ({"/d": -1}, {}, "volume size should not be less than 0"),
        ({"/d": G}, {"/d": -1}, "invalid size in usage"),
        ({"/d": G}, {"/e": -1}, "invalid size in usage"),  # the write guard: a path not in capacity
        ({"/d": MAX_SIZE + 1}, {}, "volume size is over"),
    ],
)
def test_volume_rules(capacity: dict[str, int], usage: dict[str, int], rule: str) -> None:
    with pytest.raises(InvalidVolume, match=rule):
        validated(NodeResource(volumes=capacity), NodeResource(volumes=usage))


def test_usage_of_a_path_not_in_capacity_is_accepted() -> None:
    """As upstream (its set-usage vector: /data4 is not in capacity)."""
    state = validated(NodeResource(volumes={"/d": G}), NodeResource(volumes={"/data4": T}))
    assert state.usage.volumes == {"/data4": T}


def test_storage_usage_below_zero_is_invalid_storage() -> None:
    """node_test: usage storage -1."""
    with pytest.raises(InvalidStorage) as caught:
        validated(CAPACITY, NodeResource(storage=-1))
    assert caught.value.reason == "storage usage can't be negative: -1: invalid storage"
    with pytest.raises(InvalidStorage, match="storage capacity can't be negative"):
        validated(NodeResource(storage=-1), None)
    with pytest.raises(InvalidStorage, match="over"):
        validated(NodeResource(storage=MAX_SIZE + 1), None)


def test_storage_usage_above_capacity_is_accepted() -> None:
    """As upstream: the storage total is not checked against capacity."""
    assert validated(NodeResource(storage=G), NodeResource(storage=4 * T)).usage.storage == 4 * T


def test_disk_usage_above_capacity_is_invalid_disk() -> None:
    """node_test: read IOPS 200 > 100."""
    with pytest.raises(InvalidDiskQuota) as caught:
        validated(CAPACITY, NodeResource(disks=[disk("/dev/vda", 200, 0, 0, 0)]))
    assert caught.value.reason.startswith("disk IOPS / BPS usage can't be greater than capacity")
    assert caught.value.reason.endswith(": invalid disk")


@pytest.mark.parametrize("field", range(4))
def test_every_quota_field_is_checked(field: int) -> None:
    quota = [0, 0, 0, 0]
    quota[field] = 101
    with pytest.raises(InvalidDiskQuota, match="greater than capacity"):
        validated(CAPACITY, NodeResource(disks=[disk("/dev/vda", *quota)]))
    quota[field] = -1
    with pytest.raises(InvalidDiskQuota, match="can't be negative"):
        validated(CAPACITY, NodeResource(disks=[disk("/dev/vda", *quota)]))
    with pytest.raises(InvalidDiskQuota, match="can't be negative"):
        validated(NodeResource(disks=[disk("/dev/vda", *quota)]), None)


def test_orphan_usage_disk_is_scrubbed_when_zero() -> None:
    usage = NodeResource(disks=[disk("/dev/vdz"), disk("", mounts=None), disk("/dev/vda", 1)])
    assert validated(CAPACITY, usage).usage.disks == [disk("/dev/vda", 1, 0, 0, 0, mounts=["/"])]


def test_orphan_usage_disk_with_quota_is_refused() -> None:
    with pytest.raises(InvalidDiskQuota) as caught:
        validated(CAPACITY, NodeResource(disks=[disk("/dev/vdz", 0, 0, 0, 1)]))
    assert caught.value.reason == "disk /dev/vdz not found in capacity: invalid disk"
    with pytest.raises(InvalidDiskQuota, match="not found in capacity"):
        validated(CAPACITY, NodeResource(disks=[disk("/dev/vdz", -1, 0, 0, 0)]))


def test_usage_entries_for_one_device_add_up() -> None:
    usage = NodeResource(disks=[disk("/dev/vda", 60), disk("/dev/vda", 30)])
    assert validated(CAPACITY, usage).usage.disks == [disk("/dev/vda", 90, 0, 0, 0, mounts=["/"])]
    usage = NodeResource(disks=[disk("/dev/vda", 60), disk("/dev/vda", 60)])
    with pytest.raises(InvalidDiskQuota, match="greater than capacity"):
        validated(CAPACITY, usage)


def test_a_device_listed_twice_in_capacity_is_refused() -> None:
    with pytest.raises(InvalidDiskQuota, match="listed twice"):
        validated(NodeResource(disks=[VDA, VDA]), None)


def test_errors_come_in_upstream_order() -> None:
    """Volume, then storage, then disk: the first broken rule is the one reported."""
    bad_disk = [disk("/dev/vdz", 1)]
    with pytest.raises(InvalidVolume):
        validated(CAPACITY, NodeResource(volumes={"/data0": -1}, storage=-1, disks=bad_disk))
    with pytest.raises(InvalidStorage):
        validated(CAPACITY, NodeResource(storage=-1, disks=bad_disk))


def test_inputs_are_left_alone() -> None:
    capacity = NodeResource(volumes={"/b": 1, "/a": 1}, disks=[VDB, VDA])
    usage = NodeResource(disks=[disk("/dev/vdz")])
    validated(capacity, usage)
    assert capacity.disks == [VDB, VDA] and list(capacity.volumes or ()) == ["/b", "/a"]
    assert usage.disks == [disk("/dev/vdz")]


def test_existing() -> None:
    state = validated(CAPACITY, None)
    assert existing("n", state) is state
    with pytest.raises(NodeNotFound):
        existing("n", None)


@FAST
@given(
    st.dictionaries(st.sampled_from(["/a", "/b", "/c"]), st.integers(0, 10)),
    st.dictionaries(st.sampled_from(["/a", "/b", "/c", "/d"]), st.integers(-2, 12)),
)
def test_validated_accepts_exactly_the_usage_within_capacity(
    capacity: dict[str, int], usage: dict[str, int]
) -> None:
    within = all(0 <= used <= capacity.get(path, MAX_SIZE) for path, used in usage.items())
    try:
        state = validated(NodeResource(volumes=capacity), NodeResource(volumes=usage))
    except InvalidVolume:
        assert not within
    else:
        assert within
        assert validated(state.capacity, state.usage) == state  # a fixed point


# arithmetic


def test_add_and_subtract() -> None:
    base = NodeResource(volumes={"/a": G}, disks=[VDA], storage=G)
    delta = NodeResource(volumes={"/a": G, "/b": 1}, disks=[disk("/dev/vdb", 1)], storage=2)
    assert add(base, delta) == NodeResource(
        volumes={"/a": 2 * G, "/b": 1},
        disks=[VDA, disk("/dev/vdb", 1, 0, 0, 0)],
        storage=G + 2,
    )
    assert subtract(base, delta) == NodeResource(
        volumes={"/a": 0, "/b": -1},
        disks=[VDA, disk("/dev/vdb", -1, 0, 0, 0)],
        storage=G - 2,
    )


def test_null_parts_add_as_empty() -> None:
    assert add(NodeResource(), NodeResource()) == NodeResource(volumes={}, disks=[], storage=0)


def test_without_empty_volumes_keeps_storage() -> None:
    resource = NodeResource(volumes={"/a": 0, "/b": 1, "/c": -1}, storage=7)
    assert without_empty_volumes(resource) == NodeResource(volumes={"/b": 1, "/c": -1}, storage=7)
    assert without_empty_volumes(NodeResource(volumes={"/b": 1})) == NodeResource(volumes={"/b": 1})
    assert volume_total(resource) == 0


def test_workloads_usage() -> None:
    workloads = [
        WorkloadResource(
            volume_plan_request={
                "AUTO:/x:rw:1:0:0:0:0": {"/a": 1},
                "AUTO:/y:rw:0:0:0:0:0": {"/b": 0},
            },
            storage_request=5,
            disks_request=[disk("/dev/vda", 1, 2, 3, 4, mounts=["/"]), disk("", mounts=None)],
        ),
        None,
        WorkloadResource(
            volume_plan_request={"fake": {"/a": 2, "/c": 3}},
            storage_request=1,
            disks_request=[disk("/dev/vda", 1, 1, 1, 1)],
        ),
    ]
    assert workloads_usage(workloads) == NodeResource(
        volumes={"/a": 3, "/b": 0, "/c": 3},
        disks=[disk("/dev/vda", 2, 3, 4, 5), disk("", mounts=None)],
        storage=6,
    )
    assert workloads_usage([]) == NodeResource(volumes={}, disks=[], storage=0)


paths = st.sampled_from(["/a", "/b", "/c"])
sizes = st.integers(-(2**40), 2**40)
devices = st.sampled_from(["/dev/vda", "/dev/vdb", "/dev/vdc"])
quotas = st.tuples(sizes, sizes, sizes, sizes)


@st.composite
def resources(draw: st.DrawFn, mounts: bool = True) -> NodeResource:
    chosen = draw(st.lists(devices, unique=True, max_size=3))
    return NodeResource(
        volumes=dict(sorted(draw(st.dictionaries(paths, sizes)).items())),
        disks=[
            Disk(device=device, mounts=["/m"] if mounts else None).with_quota(draw(quotas))
            for device in chosen
        ],
        storage=draw(sizes),
    )


def _without_zeros(resource: NodeResource) -> tuple[object, ...]:
    """A resource compared modulo entries at 0 (which adding creates) and disk order."""
    return (
        {path: size for path, size in (resource.volumes or {}).items() if size},
        sorted((d.device, d.quota) for d in resource.disks or () if any(d.quota)),
        resource.storage,
    )


@FAST
@given(resources(), resources(mounts=False))
def test_add_then_subtract_is_identity(base: NodeResource, delta: NodeResource) -> None:
    again = subtract(add(base, delta), delta)
    assert _without_zeros(again) == _without_zeros(base)
    assert {d.device: d.mounts for d in base.disks or ()} == {
        d.device: d.mounts
        for d in again.disks or ()
        if d.device in {b.device for b in base.disks or ()}
    }


@FAST
@given(resources(), resources(), resources())
def test_add_is_associative_and_commutative(
    a: NodeResource, b: NodeResource, c: NodeResource
) -> None:
    assert _without_zeros(add(add(a, b), c)) == _without_zeros(add(a, add(b, c)))
    assert _without_zeros(add(a, b)) == _without_zeros(add(b, a))


def test_node_state_is_frozen() -> None:
    state = NodeState(capacity=CAPACITY, usage=NodeResource())
    with pytest.raises(AttributeError):
        state.usage = CAPACITY  # type: ignore[misc]
