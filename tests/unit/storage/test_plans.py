"""calculate-deploy, calculate-realloc and get-nodes-deploy-capacity as pure answers:
projections/storage/placement/plans.py, capacity.py and workloads.py, with upstream's vectors
on F4."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from resource_extend.ledger.model.errors import InvalidRequest, NotEnoughResource, PluginError
from resource_extend.projections.answers import DeployCapacity
from resource_extend.projections.storage.grammar.bindings import InvalidVolume, parse_binding
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.placement.capacity import (
    deploy_capacity,
    nodes_deploy_capacity,
)
from resource_extend.projections.storage.placement.plans import (
    FAKE_BINDING,
    MAX_PLACED_BINDINGS,
    DeployAnswer,
    ReallocAnswer,
    calculate_deploy,
    calculate_realloc,
    storage_fits,
)
from resource_extend.projections.storage.placement.workloads import disks_limit
from resource_extend.projections.storage.wire.requests import (
    InvalidStorage,
    ParsedWorkloadRequest,
    WorkloadRequestWire,
    normalise,
    workload_request,
)
from resource_extend.projections.storage.wire.resources import (
    NodeResource,
    WorkloadRequest,
    WorkloadResource,
)
from tests.unit.storage.schedule_fixtures import F4_CAPACITY, F4_USAGE, G, M, T, bindings
from tests.unit.strategies import FAST

BOUND = 100


def request(*texts: str, storage: int = 0, limit: list[str] | None = None) -> WorkloadRequest:
    asked = bindings(*texts)
    return normalise(asked, bindings(*limit) if limit is not None else asked, storage, storage)


def deploy(
    asked: WorkloadRequest,
    count: int,
    capacity: NodeResource = F4_CAPACITY,
    usage: NodeResource = F4_USAGE,
) -> DeployAnswer:
    return calculate_deploy(capacity, usage, asked, count, BOUND)


# --- calculate-deploy ------------------------------------------------------------------------


def test_a_negative_storage_is_refused_before_any_node_is_read() -> None:
    """Upstream's ``storage: "-1"`` for deploy and capacity: the request's own check."""
    with pytest.raises(InvalidStorage, match="invalid storage"):
        request(storage=-1)


def test_deploy_checks_storage_first() -> None:
    with pytest.raises(NotEnoughResource) as raised:
        deploy(request("AUTO:/dir0:rwm:10T"), 10)
    assert raised.value.reason == (
        f"not enough storage, request: {10 * T}, available: 0: "
        "cannot alloc a plan, not enough resource"
    )


def test_deploy_of_monopoly_terabytes() -> None:
    with pytest.raises(
        NotEnoughResource, match="not enough storage, request: 1099511627776, available: 4"
    ):
        deploy(request("AUTO:/dir0:rwm:1T"), 10)
    (workload,) = deploy(request("AUTO:/dir0:rwm:1T"), 1).workloads_resource
    assert workload.volume_plan_request == {"AUTO:/dir0:mrw:1099511627776:0:0:0:0": {"/data0": T}}


def test_deploy_needs_enough_plans() -> None:
    with pytest.raises(NotEnoughResource) as raised:
        deploy(request("AUTO:/dir0:rwm:1G"), 5)
    assert raised.value.reason == (
        "not enough volume plan, need 5, available 4: cannot alloc a plan, not enough resource"
    )


def test_deploy_of_storage_only() -> None:
    answer = deploy(request(storage=G), 10)
    assert len(answer.workloads_resource) == len(answer.engines_params) == 10
    assert answer.engines_params[0] == msgspec.structs.replace(answer.engines_params[0], storage=G)
    assert answer.workloads_resource[0] == WorkloadResource(storage_request=G, storage_limit=G)


def test_deploy_of_nothing() -> None:
    answer = calculate_deploy(F4_CAPACITY, F4_USAGE, WorkloadRequest(), 3, BOUND)
    assert [msgspec.json.encode(e) for e in answer.engines_params] == [
        b'{"volumes":null,"volume_changed":false,"storage":0,"iops_options":{}}'
    ] * 3
    assert answer.workloads_resource == [WorkloadResource()] * 3


VDA = Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((1000, 1000, G, G))
ONE = NodeResource(volumes={"/data0": T}, disks=[VDA], storage=3 * T)
ONE_USAGE = NodeResource(
    volumes={"/data0": 0}, disks=[Disk(device="/dev/vda", mounts=["/", "/data0"])]
)


def test_deploy_answer_in_upstreams_wire_shape() -> None:
    (engine,), (workload,) = msgspec.structs.astuple(
        calculate_deploy(
            ONE, ONE_USAGE, request("AUTO:/data:rw:100GiB:100:100:1M:1M", storage=10 * G), 1, BOUND
        )
    )
    key = "AUTO:/data:rw:107374182400:100:100:1048576:1048576"
    charged = (
        '{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":100,"write_IOPS":100,'
        '"read_bps":1048576,"write_bps":1048576}'
    )
    assert msgspec.json.encode(workload).decode() == (
        f'{{"volumes_request":["{key}"],"volumes_limit":["{key}"],'
        f'"volume_plan_request":{{"{key}":{{"/data0":107374182400}}}},'
        f'"volume_plan_limit":{{"{key}":{{"/data0":107374182400}}}},'
        f'"storage_request":118111600640,"storage_limit":118111600640,'
        f'"disks_request":[{charged}],"disks_limit":[{charged}]}}'
    )
    assert msgspec.json.encode(engine).decode() == (
        '{"volumes":["/data0:/data:rw:107374182400:100:100:1048576:1048576"],'
        '"volume_changed":false,"storage":118111600640,'
        '"iops_options":{"/dev/vda":"100:100:1048576:1048576"}}'
    )


def test_deploy_engine_sizes_are_the_limit_or_the_monopoly_share() -> None:
    asked = request(
        "AUTO:/a:rw:1G",
        "AUTO:/m:rwm:1G",
        "/src:/dst:ro",
        limit=["AUTO:/a:rw:2G", "AUTO:/m:rwm:1G", "/src:/dst:ro"],
    )
    usage = NodeResource(volumes={**(F4_USAGE.volumes or {}), "/data0": 1})
    (engine,), (workload,) = msgspec.structs.astuple(deploy(asked, 1, usage=usage))
    assert engine.volumes == [
        "/src:/dst:ro:0",
        "/data0:/a:rw:2147483648",
        "/data1:/m:rw:1099511627776",
    ]
    # the limit plan holds the planned request sizes (upstream's quirk)
    assert workload.volume_plan_limit == {
        "AUTO:/a:rw:2147483648:0:0:0:0": {"/data0": G},
        "AUTO:/m:mrw:1073741824:0:0:0:0": {"/data1": T},
    }


# --- calculate-realloc -----------------------------------------------------------------------

CURRENT_BINDINGS = ["AUTO:/dir0:rw:100GiB", "AUTO:/dir1:mrw:100GiB", "AUTO:/dir2:rw:0"]
CURRENT = WorkloadResource(
    volumes_request=[b.canonical() for b in bindings(*CURRENT_BINDINGS)],
    volumes_limit=[b.canonical() for b in bindings(*CURRENT_BINDINGS)],
    volume_plan_request={
        "AUTO:/dir0:rw:107374182400:0:0:0:0": {"/data0": 100 * G},
        "AUTO:/dir1:mrw:107374182400:0:0:0:0": {"/data2": T},
        "AUTO:/dir2:rw:0:0:0:0:0": {"/data0": 0},
    },
)
CURRENT = msgspec.structs.replace(CURRENT, volume_plan_limit=CURRENT.volume_plan_request)
COMMITTED = NodeResource(
    volumes={"/data0": 100 * G, "/data1": 0, "/data2": T, "/data3": 0}, disks=[]
)


def asked(*texts: str, storage: int = 0, limit: bool = True) -> ParsedWorkloadRequest:
    given = tuple(bindings(*texts))
    return ParsedWorkloadRequest(
        request=given, limit=given if limit else (), storage_request=storage, storage_limit=storage
    )


def realloc(wanted: ParsedWorkloadRequest, current: WorkloadResource = CURRENT) -> ReallocAnswer:
    return calculate_realloc(F4_CAPACITY, COMMITTED, current, wanted)


def test_realloc_refuses_a_negative_merged_storage() -> None:
    with pytest.raises(InvalidStorage):
        realloc(asked(*CURRENT_BINDINGS, storage=-1, limit=False))


def test_realloc_refuses_a_merge_past_int64() -> None:
    """Sizes, quotas and storage add up in a realloc: a sum core could not decode is refused
    (upstream wrapped it), whichever of them grows."""
    with pytest.raises(InvalidStorage, match="over"):
        limited = msgspec.structs.replace(CURRENT, storage_request=G, storage_limit=G)
        realloc(ParsedWorkloadRequest(storage_request=1, storage_limit=2**63 - 1), limited)
    with pytest.raises(InvalidVolume, match="over"):
        realloc(asked("AUTO:/dir0:rw:8191P", limit=True), current=_grown(8191 * 2**50))


def _grown(size: int) -> WorkloadResource:
    """CURRENT with /dir0 at ``size`` bytes."""
    key = f"AUTO:/dir0:rw:{size}:0:0:0:0"
    texts = [key, *CURRENT.volumes_request[1:]]
    plan = {key: {"/data0": size}, **dict(list(CURRENT.volume_plan_request.items())[1:])}
    return msgspec.structs.replace(
        CURRENT,
        volumes_request=texts,
        volumes_limit=texts,
        volume_plan_request=plan,
        volume_plan_limit=plan,
    )


@pytest.mark.parametrize(
    "wanted",
    [asked("AUTO:/dir1:mrw:100GiB", storage=4 * T), asked("AUTO:/dir1:mrw:1TiB")],
)
def test_realloc_that_does_not_fit(wanted: ParsedWorkloadRequest) -> None:
    with pytest.raises(NotEnoughResource, match=r"cannot alloc a plan, not enough resource$"):
        realloc(wanted)


def test_realloc_grows_a_monopoly_binding_in_place() -> None:
    answer = realloc(asked("AUTO:/dir1:mrw:100GiB", storage=G))
    new = answer.workload_resource
    assert new.volume_plan_request == {
        "AUTO:/dir0:rw:107374182400:0:0:0:0": {"/data0": 100 * G},
        "AUTO:/dir1:mrw:214748364800:0:0:0:0": {"/data2": T},
        "AUTO:/dir2:rw:0:0:0:0:0": {"/data0": 0},
    }
    assert new.storage_request == new.storage_limit == 101 * G
    assert answer.engine_params.volume_changed is False
    assert answer.engine_params.volumes == [
        "/data0:/dir0:rw:107374182400",
        "/data2:/dir1:rw:1099511627776",
        "/data0:/dir2:rw:0",
    ]
    assert answer.delta_resource == WorkloadResource(
        volume_plan_request={FAKE_BINDING: {"/data0": 0, "/data2": 0}},
        storage_request=101 * G,
        disks_request=[Disk(device="")],  # the monopoly group's zero entry: no disk covers it
        disks_limit=None,
    )


def test_realloc_of_storage_only_carries_the_plan_over() -> None:
    answer = realloc(asked(storage=G))
    assert answer.workload_resource.volume_plan_request == CURRENT.volume_plan_request
    assert answer.engine_params.volume_changed is False
    assert answer.engine_params.storage == G


def test_realloc_delta_lists_each_path_and_a_new_binding_changes_volumes() -> None:
    current = msgspec.structs.replace(CURRENT, storage_request=200 * G, storage_limit=200 * G)
    answer = realloc(asked("AUTO:/dir3:rw:10G", "AUTO:/dir0:rw:-100G"), current)
    assert answer.workload_resource.volume_plan_request["AUTO:/dir3:rw:10737418240:0:0:0:0"] == {
        "/data0": 10 * G
    }
    assert answer.delta_resource.volume_plan_request == {
        FAKE_BINDING: {"/data0": -90 * G, "/data2": 0}
    }
    assert answer.delta_resource.storage_request == -90 * G
    assert answer.engine_params.volume_changed is True


def test_realloc_limit_plan_is_planned_plus_limit_minus_request() -> None:
    wanted = ParsedWorkloadRequest(
        request=tuple(bindings("AUTO:/dir3:rw:10G")), limit=tuple(bindings("AUTO:/dir3:rw:20G"))
    )
    answer = realloc(wanted)
    assert answer.workload_resource.volume_plan_limit["AUTO:/dir3:rw:21474836480:0:0:0:0"] == {
        "/data0": 20 * G
    }
    assert "/data0:/dir3:rw:21474836480" in (answer.engine_params.volumes or [])


IOPS_NODE = NodeResource(volumes={"/data0": T}, disks=[VDA], storage=T)
IOPS_BINDING = "AUTO:/db:rw:1G:100:100:1M:1M"
IOPS_CURRENT = WorkloadResource(
    volumes_request=[bindings(IOPS_BINDING)[0].canonical()],
    volumes_limit=[bindings(IOPS_BINDING)[0].canonical()],
    volume_plan_request={bindings(IOPS_BINDING)[0].canonical(): {"/data0": G}},
    volume_plan_limit={bindings(IOPS_BINDING)[0].canonical(): {"/data0": G}},
    storage_request=G,
    storage_limit=G,
    disks_request=[Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((100, 100, M, M))],
    disks_limit=[Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((100, 100, M, M))],
)
IOPS_USAGE = NodeResource(
    volumes={"/data0": G},
    disks=[Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((100, 100, M, M))],
    storage=G,
)


def test_storage_only_realloc_keeps_the_disks() -> None:
    """resource-extend's KeepsDisksWithoutReschedule (upstream dropped them, and the
    delta released the IOPS from node usage)."""
    answer = calculate_realloc(IOPS_NODE, IOPS_USAGE, IOPS_CURRENT, asked(storage=G))
    assert answer.workload_resource.disks_request == IOPS_CURRENT.disks_request
    assert answer.engine_params.iops_options == {"/dev/vda": "100:100:1048576:1048576"}
    (zero,) = answer.delta_resource.disks_request or []
    assert zero.device == "/dev/vda" and zero.quota == (0, 0, 0, 0)


def test_a_device_listed_twice_in_the_workload_is_kept_whole() -> None:
    """A workload core hands back may list one device twice (usage sums both): a storage-only
    realloc's delta for it is still zero, not minus one of the entries."""
    halves = [
        Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((60, 60, M, M)),
        Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((40, 40, 0, 0)),
    ]
    current = msgspec.structs.replace(IOPS_CURRENT, disks_request=halves)
    answer = calculate_realloc(IOPS_NODE, IOPS_USAGE, current, asked(storage=G))
    (zero,) = answer.delta_resource.disks_request or []
    assert zero.device == "/dev/vda" and zero.quota == (0, 0, 0, 0)


def test_a_binding_removed_releases_its_disk_quota() -> None:
    removed = ParsedWorkloadRequest(
        request=tuple(bindings("AUTO:/db:rw:-2G", "AUTO:/new:rw:1G")),
        limit=tuple(bindings("AUTO:/db:rw:-2G", "AUTO:/new:rw:1G")),
    )
    answer = calculate_realloc(IOPS_NODE, IOPS_USAGE, IOPS_CURRENT, removed)
    assert answer.workload_resource.disks_request == [VDA.with_quota((0, 0, 0, 0))]  # /new
    (released,) = answer.delta_resource.disks_request or []
    assert released.device == "/dev/vda" and released.quota == (-100, -100, -M, -M)
    assert answer.delta_resource.volume_plan_request == {FAKE_BINDING: {"/data0": 0}}


def test_disks_limit_skips_paths_no_disk_covers() -> None:
    """Upstream dereferences a missing disk here, e.g. after rm-disks."""
    limit = bindings("/gone/x:/m:rw:0:10", "/data0/y:/n:rw:0:5", "AUTO:/a:rw:1G:7")
    plan_limit = {limit[2].canonical(): {"/nowhere": G}}
    (only,) = disks_limit(limit, plan_limit, [Disk(device="/dev/vda", mounts=["/data0"])])
    assert only.device == "/dev/vda" and only.quota == (5, 0, 0, 0)


def test_realloc_after_rm_disks_keeps_working_without_rescheduling() -> None:
    current = msgspec.structs.replace(
        IOPS_CURRENT,
        volumes_request=[*IOPS_CURRENT.volumes_request, "/mnt/x:/m:rw:0:10:0:0:0"],
        volumes_limit=[*IOPS_CURRENT.volumes_limit, "/mnt/x:/m:rw:0:10:0:0:0"],
    )
    no_disks = NodeResource(volumes={"/data0": T}, disks=[], storage=T)
    answer = calculate_realloc(no_disks, IOPS_USAGE, current, asked(storage=G))
    assert answer.workload_resource.disks_limit == []
    assert answer.engine_params.iops_options == {}


def test_storage_fits_truncates_toward_zero() -> None:
    assert storage_fits(NodeResource(storage=10), NodeResource(storage=0), 3) == 3
    assert storage_fits(NodeResource(storage=0), NodeResource(storage=5), 3) == -1


# --- get-nodes-deploy-capacity ---------------------------------------------------------------

TEN = [(f"test{i}", F4_CAPACITY, F4_USAGE) for i in range(10)]


@pytest.mark.parametrize(
    ("wanted", "total", "usage", "rate"),
    [
        (request(storage=T), 40, 0.0, 0.25),
        (request("AUTO:/dir0:rwm:1G"), 40, 0.0, 1 / 4096),
        (request("AUTO:/dir0:rwm:1G", storage=T), 30, 0.0, 1 / 4096),
    ],
)
def test_capacity_of_ten_f4_nodes(
    wanted: WorkloadRequest, total: int, usage: float, rate: float
) -> None:
    answer = nodes_deploy_capacity(TEN, wanted, BOUND)
    assert answer.total == total
    assert answer.nodes_deploy_capacity_map["test0"] == DeployCapacity.of(total // 10, usage, rate)


def test_storage_only_capacity_is_capped_by_the_bound() -> None:
    """As resource-extend caps it (the older plugin answered 4096: 4 T / 1 G)."""
    assert deploy_capacity(F4_CAPACITY, F4_USAGE, request(storage=G), BOUND).capacity == BOUND
    assert deploy_capacity(F4_CAPACITY, F4_USAGE, request(storage=T), BOUND).capacity == 4


def test_capacity_of_nothing_is_the_bound() -> None:
    assert deploy_capacity(F4_CAPACITY, F4_USAGE, WorkloadRequest(), BOUND) == DeployCapacity.of(
        BOUND, 0.0, 0.0
    )


def test_usage_counts_volumes_and_can_pass_one() -> None:
    usage = NodeResource(volumes={"/data0": T, "/data9": 3 * T}, storage=T)
    entry = deploy_capacity(F4_CAPACITY, usage, request("AUTO:/x:rw:1T"), BOUND)
    assert (entry.capacity, bytes(entry.usage), bytes(entry.rate)) == (3, b"1", b"0.25")
    by_storage = deploy_capacity(F4_CAPACITY, usage, request(storage=T), BOUND)
    assert (by_storage.capacity, bytes(by_storage.usage), bytes(by_storage.rate)) == (
        3,
        b"0.25",
        b"0.25",
    )


def test_nodes_without_capacity_are_left_out_and_the_total_saturates() -> None:
    full = NodeResource(volumes={"/data0": T, "/data1": T, "/data2": T, "/data3": T}, storage=4 * T)
    nodes = [
        ("full", F4_CAPACITY, full),
        ("a", F4_CAPACITY, F4_USAGE),
        ("b", F4_CAPACITY, F4_USAGE),
    ]
    answer = nodes_deploy_capacity(nodes, request("AUTO:/x:rw:1T"), BOUND)
    assert list(answer.nodes_deploy_capacity_map) == ["a", "b"]
    assert answer.total == 8
    huge, bound = NodeResource(storage=2**62), 2**62
    answer = nodes_deploy_capacity(
        [("x", huge, NodeResource()), ("y", huge, NodeResource())], request(storage=1), bound
    )
    assert answer.total == 2**63 - 1


def test_capacity_answer_in_core_shape() -> None:
    answer = nodes_deploy_capacity(TEN[:1], request(storage=T), BOUND)
    assert msgspec.json.encode(answer) == (
        b'{"nodes_deploy_capacity_map":{"test0":{"Capacity":4,"Usage":0,"Rate":0.25,'
        b'"Weight":1}},"total":4}'
    )


def test_realloc_refuses_giving_back_a_binding_the_workload_does_not_hold() -> None:
    """Merged below zero, an unheld binding would be dropped and lower only the storage."""
    with pytest.raises(InvalidVolume, match="gives back AUTO:/b:rw, which the workload does not"):
        realloc(asked("AUTO:/b:rw:-10G"))


def test_realloc_removing_a_binding_takes_off_only_what_it_held() -> None:
    """dir0 holds 100G; giving back 101G removes it, and the storage falls by 100G (upstream
    took 101G off: below zero for a workload whose storage was its bindings)."""
    current = msgspec.structs.replace(CURRENT, storage_request=200 * G, storage_limit=200 * G)
    answer = realloc(asked("AUTO:/dir0:rw:-101G"), current)
    new = answer.workload_resource
    assert "AUTO:/dir0:rw:107374182400:0:0:0:0" not in new.volume_plan_request
    assert new.storage_request == new.storage_limit == 100 * G
    assert answer.delta_resource.storage_request == -100 * G


def test_realloc_refuses_a_second_binding_at_a_held_destination() -> None:
    with pytest.raises(InvalidVolume, match="destination /dir0 is already bound by AUTO:/dir0"):
        realloc(asked("AUTO:/dir0:mrw:1G"))
    with pytest.raises(InvalidVolume, match="destination /dir9 is bound twice"):
        realloc(asked("AUTO:/dir9:rw:1G", "AUTO:/dir9:rw:2G"))


def test_realloc_takes_held_bindings_as_stored() -> None:
    """A binding the workload holds is not checked again (an older release may have stored
    one these rules refuse now): it can still grow, shrink and be removed."""
    stored = "AUTO:/old/:rw:1073741824:0:0:0:0"
    current = WorkloadResource(
        volumes_request=[stored],
        volumes_limit=[stored],
        volume_plan_request={stored: {"/data0": G}},
        volume_plan_limit={stored: {"/data0": G}},
        storage_request=G,
        storage_limit=G,
    )
    grown = realloc(asked("AUTO:/old/:rw:1G"), current)
    assert grown.workload_resource.storage_request == 2 * G
    gone = realloc(asked("AUTO:/old/:rw:-2G"), current)
    assert gone.workload_resource.volumes_request == []
    with pytest.raises(InvalidVolume, match="trailing"):
        realloc(asked("AUTO:/new/:rw:1G"), current)


# --- what the engine is handed is what is charged ----------------------------------------------

binding_texts = st.builds(
    lambda source, destination, flags, size, iops: f"{source}:{destination}:{flags}:{size}:{iops}",
    st.sampled_from(["AUTO"] * 40 + ["", "/srv/x", "vol", "/data0/../x"]),
    st.sampled_from([f"/{c}" for c in "abcdefghijkl"] * 4 + ["/a/", "b", "/a/../b"]),
    st.sampled_from(["rw"] * 40 + ["mrw", "or", "rowo", "ro", "x", "o", "mo"]),
    st.sampled_from(["1G", "100G", "0"]),
    st.sampled_from(["0", "0", "10"]),
)
"""Bindings that collide (a destination twice), clean and not, with every kind of flag."""


requests_listed = st.one_of(
    st.lists(binding_texts, min_size=1, max_size=4),
    st.lists(binding_texts, min_size=1, max_size=4, unique_by=lambda text: text.split(":")[1]),
)
"""Half of them name each destination once: most of those are placed."""


@settings(FAST, max_examples=200)
@given(requests_listed, st.integers(1, 3))
def test_every_engine_mount_is_one_plan_entry_charged_as_placed(
    texts: list[str], count: int
) -> None:
    """Whatever a deploy request lists (repeats, shared destinations, overlay flags, unclean
    paths), either it is refused or each workload's engine gets one mount per binding, at a
    destination of its own, and every scheduled one on the path its plan entry charges."""
    capacity = NodeResource(
        volumes={"/data0": T, "/data1": T, "/data2": T},
        disks=[Disk(device="/dev/vda", mounts=["/"]).with_quota((100, 100, 0, 0))],
        storage=4 * T,
    )
    usage = NodeResource(volumes={"/data0": G, "/data1": 0, "/data2": 0}, disks=[])
    try:
        wanted = workload_request(WorkloadRequestWire(volumes=texts))
        answer = calculate_deploy(capacity, usage, wanted, count, BOUND)
    except PluginError:
        event("refused")
        return
    event("placed")
    for engine, workload in zip(answer.engines_params, answer.workloads_resource, strict=True):
        mounts = [parse_binding(text) for text in engine.volumes or ()]
        requested = [parse_binding(text) for text in workload.volumes_request]
        assert len(mounts) == len(requested) == len(texts)
        assert len({mount.destination for mount in mounts}) == len(mounts)
        scheduled = [binding for binding in requested if binding.scheduled]
        assert len(workload.volume_plan_request) == len(scheduled)
        planned = {parse_binding(key).destination: placed for key, placed in
                   workload.volume_plan_request.items()}  # fmt: skip
        for mount in mounts:
            placed = planned.get(mount.destination)
            if placed is not None:
                assert [mount.source] == list(placed)
            assert parse_binding(mount.engine()) == mount


def test_a_deploy_answer_holds_at_most_2_to_the_20_bindings() -> None:
    """deploy_count times the request's bindings: at the bound a deploy answers, past it it is
    refused before any placement, and capacity never offers more than one answer holds."""
    mounts = request(*(f"/mnt/m{i}:/d{i}:rw" for i in range(1024)))
    answer = calculate_deploy(F4_CAPACITY, F4_USAGE, mounts, MAX_PLACED_BINDINGS // 1024, 10)
    assert len(answer.workloads_resource) == 1024
    with pytest.raises(InvalidRequest, match="1049600 bindings in one answer, more than 1048576"):
        calculate_deploy(F4_CAPACITY, F4_USAGE, mounts, 1025, 10)
    assert deploy_capacity(F4_CAPACITY, F4_USAGE, mounts, 10_000).capacity == 1024
    one = request("/mnt/m:/d:rw")
    assert deploy_capacity(F4_CAPACITY, F4_USAGE, one, 10_000).capacity == 10_000


def test_a_realloc_delta_is_written_as_upstreams() -> None:
    """Upstream's delta sets the plan, the storage and the disks; its other lists are empty
    (bindings ``[]``, plans ``{}``) but ``disks_limit`` is ``null``, as Go writes a nil list."""
    answer = calculate_realloc(IOPS_NODE, IOPS_USAGE, IOPS_CURRENT, asked(storage=G))
    assert msgspec.json.encode(answer.delta_resource) == (
        b'{"volumes_request":[],"volumes_limit":[],"volume_plan_request":'
        b'{"fake-source:fake-destination:fake-flags:0:0:0:0:0":{"/data0":0}},'
        b'"volume_plan_limit":{},"storage_request":1073741824,"storage_limit":0,'
        b'"disks_request":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":0,'
        b'"write_IOPS":0,"read_bps":0,"write_bps":0}],"disks_limit":null}'
    )


ISSUE_NODE = NodeResource(
    volumes={"/data0": T, "/data1": T},
    disks=[Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((100, 100, G, G))],
    storage=2 * T,
)
"""A node whose one disk covers every path (mount ``/``), quota but no request for it."""
ZERO_VDA = (
    b'[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":0,"write_IOPS":0,'
    b'"read_bps":0,"write_bps":0}]'
)


def test_deploy_lists_upstreams_zero_entry_for_the_disk_of_each_normal_binding() -> None:
    """Upstream's normal pass adds an entry per binding, quota or not: three bindings on one
    disk merge into one all-zero entry, which core stores with the workload."""
    asked = request("AUTO:/w3:rw:20G", "AUTO:/w1:rw:0", "AUTO:/w4:rw:2G")
    usage = NodeResource(volumes={"/data0": 0, "/data1": 0}, disks=[])
    (workload,) = deploy(asked, 1, ISSUE_NODE, usage).workloads_resource
    assert msgspec.json.encode(workload.disks_request) == ZERO_VDA
    assert workload.disks_limit == []


def test_a_realloc_lists_them_in_its_resource_and_its_delta() -> None:
    usage = NodeResource(volumes={"/data0": 0, "/data1": 0}, disks=[])
    answer = calculate_realloc(ISSUE_NODE, usage, WorkloadResource(), asked("AUTO:/w3:rw:20G"))
    assert msgspec.json.encode(answer.workload_resource.disks_request) == ZERO_VDA
    assert msgspec.json.encode(answer.delta_resource.disks_request) == ZERO_VDA
