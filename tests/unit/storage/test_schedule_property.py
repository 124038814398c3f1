"""The bounded scheduler against the unbounded reference, over random nodes and
requests: the same plan count and the same plans, for placement and for realloc with affinity.

Nodes have a few volumes (usage often exactly 0, so unused), nested paths, and disks whose
mounts and quotas cover some paths and not others; requests mix normal, monopoly, unlimited
and mount bindings, with and without quota. Sizes are small next to the volumes so that the
normal enumeration runs to many passes, and the bound is small so that it cuts them.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from resource_extend.ledger.model.errors import NotEnoughResource, PluginError
from resource_extend.projections.storage.grammar.bindings import Binding, merge
from resource_extend.projections.storage.grammar.disks import Disk, Quota
from resource_extend.projections.storage.placement.affinity import affinity_plan
from resource_extend.projections.storage.placement.plans import calculate_deploy
from resource_extend.projections.storage.placement.schedule import plan_count, volume_plans
from resource_extend.projections.storage.wire.requests import normalise
from resource_extend.projections.storage.wire.resources import NodeResource
from tests.unit.storage import reference
from tests.unit.storage.schedule_fixtures import applied, usage_is_valid

DIFFERENTIAL = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

PATHS = ["/a", "/b", "/a/x", "/data", "/data0", "/mnt/v"]
MOUNTS = ["/", "/a", "/data", "/mnt", "", "/b", "/data0"]
SOURCES = ["/a/s", "/mnt/s", "/x", "/data/q"]

small_quotas = st.tuples(*[st.sampled_from([0, 0, 1, 2, 3, 5, 8]) for _ in range(4)])


def drawn_disks(
    draw: st.DrawFn, quotas: list[int], root: list[str] | None = None
) -> tuple[list[Disk], list[Disk]]:
    """Up to three disks mounting some of ``MOUNTS`` (the first also ``root``), each quota one
    of ``quotas``: as capacity, and as usage (some of each quota taken)."""
    disks, used_disks = [], []
    for i in range(draw(st.integers(0, 3))):
        mounts = draw(st.lists(st.sampled_from(MOUNTS), unique=True, max_size=3))
        mounts = mounts if i or not root else [*root, *mounts]
        quota = draw(st.tuples(*[st.sampled_from(quotas) for _ in range(4)]))
        taken = tuple(draw(st.integers(0, q)) if draw(st.booleans()) else 0 for q in quota)
        disks.append(Disk(device=f"/dev/vd{'abc'[i]}", mounts=mounts).with_quota(quota))
        used_disks.append(Disk(device=f"/dev/vd{'abc'[i]}", mounts=mounts).with_quota(taken))
    return disks, used_disks


@st.composite
def nodes(draw: st.DrawFn) -> tuple[NodeResource, NodeResource]:
    scale = draw(st.sampled_from([1, 1, 3, 10]))
    paths = draw(st.lists(st.sampled_from(PATHS), unique=True, min_size=1, max_size=5))
    capacity: dict[str, int] = {}
    usage: dict[str, int] = {}
    for path in paths:
        size = draw(st.integers(0, 60)) * scale
        capacity[path] = size
        usage[path] = draw(st.one_of(st.just(0), st.integers(0, size)))
    disks, used_disks = drawn_disks(draw, [0, 5, 20, 40, 1000])
    return (
        NodeResource(volumes=capacity, disks=disks),
        NodeResource(volumes=usage, disks=used_disks),
    )


@st.composite
def one_binding(draw: st.DrawFn, destination: str) -> Binding:
    kind = draw(st.sampled_from(["normal"] * 3 + ["mono"] * 2 + ["unlimited", "mount", "mount"]))
    quota: Quota = draw(st.one_of(st.just((0, 0, 0, 0)), small_quotas))
    if kind == "normal":
        source = draw(st.sampled_from(["AUTO", "", "/x/AUTO"]))
        return Binding(source, destination).with_numbers(draw(st.integers(0, 25)), quota)
    if kind == "mono":
        return Binding("AUTO", destination, "mrw").with_numbers(draw(st.integers(1, 25)), quota)
    if kind == "unlimited":
        return Binding("AUTO", destination)
    return Binding(draw(st.sampled_from(SOURCES)), destination).with_numbers(0, quota)


@st.composite
def requests(draw: st.DrawFn, first: int = 0) -> list[Binding]:
    count = draw(st.integers(1, 4))
    return [draw(one_binding(f"/d{first + i}")) for i in range(count)]


def places_as_the_reference(
    node: tuple[NodeResource, NodeResource], request: list[Binding], bound: int
) -> list[Any]:
    """The bounded scheduler's plans for ``request`` on ``node``, checked to be the
    reference's."""
    capacity, usage = node
    found = volume_plans(capacity, usage, request, bound)
    assert [(p.volumes, p.disks) for p in found] == reference.volume_plans(
        capacity, usage, request, bound
    )
    return found


@DIFFERENTIAL
@given(node=nodes(), request=requests(), bound=st.integers(1, 50))
def test_bounded_plans_equal_the_reference(
    node: tuple[NodeResource, NodeResource], request: list[Binding], bound: int
) -> None:
    found = places_as_the_reference(node, request, bound)
    assert plan_count(*node, request, bound) == len(found)
    kinds = {k for b in request for k in ("normal", "monopoly", "unlimited") if getattr(b, k)}
    event(f"plans: {'none' if not found else 'bound' if len(found) == bound else 'some'}")
    event(f"classes: {'+'.join(sorted(kinds)) or 'mounts only'}")


QUOTAS = [(0, 0, 0, 0), (0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0), (2, 0, 1, 3)]


@st.composite
def many_bindings(draw: st.DrawFn) -> list[Binding]:
    """Up to 40 bindings with few distinct sizes and quotas, so that many are equal and
    bindings with and without quota interleave in the placing order (size, canonical)."""
    sizes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=3))
    kinds = ["normal"] * 8 + ["unlimited", "mount", "mount"] + draw(st.sampled_from([[], ["mono"]]))
    request = []
    for i in range(draw(st.integers(2, 40))):
        kind = draw(st.sampled_from(kinds))
        quota: Quota = draw(st.sampled_from(QUOTAS))
        size = draw(st.sampled_from(sizes))
        if kind == "normal" and (size or any(quota)):
            source = draw(st.sampled_from(["AUTO", ""]))
            request.append(Binding(source, f"/d{i}").with_numbers(size, quota))
        elif kind == "mono":
            request.append(Binding("AUTO", f"/d{i}", "mrw").with_numbers(size + 1, quota))
        elif kind == "mount":
            source = draw(st.sampled_from(SOURCES))
            request.append(Binding(source, f"/d{i}").with_numbers(0, quota))
        else:
            request.append(Binding("AUTO", f"/d{i}"))
    return request


@st.composite
def roomy_nodes(draw: st.DrawFn) -> tuple[NodeResource, NodeResource]:
    """Volumes of up to 300 bytes, disks with up to 1000 of each figure: room for many
    passes of many small bindings."""
    paths = draw(st.lists(st.sampled_from(PATHS), unique=True, min_size=1, max_size=6))
    capacity = {path: draw(st.integers(0, 300)) for path in paths}
    usage = {
        path: draw(st.one_of(st.just(0), st.integers(0, size))) for path, size in capacity.items()
    }
    root = draw(st.sampled_from([["/"], ["/"], ["/"], []]))  # a disk serving every path
    disks, used_disks = drawn_disks(draw, [0, 30, 200, 1000, 1000, 1000, 1000], root)
    return (
        NodeResource(volumes=capacity, disks=disks),
        NodeResource(volumes=usage, disks=used_disks),
    )


@st.composite
def split_nodes(draw: st.DrawFn) -> tuple[NodeResource, NodeResource]:
    """Two or three used volumes on two disks, one with read IOPS only and one with write
    IOPS only: a binding with one kind of quota passes over the other disk's volumes, which
    the next bindings may then fit better, or overtake later."""
    paths = ["/a", "/b", "/c"][: draw(st.integers(2, 3))]
    capacity = {path: draw(st.integers(20, 300)) for path in paths}
    usage = {path: draw(st.integers(1, 4)) for path in paths}
    split = draw(st.integers(1, len(paths) - 1))
    reads, writes = draw(st.sampled_from([5, 40, 1000])), draw(st.sampled_from([5, 40, 1000]))
    disks = [
        Disk(device="/dev/vda", mounts=paths[:split]).with_quota((reads, 0, 0, 0)),
        Disk(device="/dev/vdb", mounts=paths[split:]).with_quota((0, writes, 0, 0)),
    ]
    return NodeResource(volumes=capacity, disks=disks), NodeResource(volumes=usage)


@st.composite
def split_bindings(draw: st.DrawFn) -> list[Binding]:
    """Normal bindings with read IOPS, write IOPS or none, for :func:`split_nodes`."""
    quotas = [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0)]
    return [
        Binding("AUTO", f"/d{i}").with_numbers(
            draw(st.sampled_from([1, 2, 3, 5, 8])), draw(st.sampled_from(quotas))
        )
        for i in range(draw(st.integers(2, 12)))
    ]


@DIFFERENTIAL
@given(node=split_nodes(), request=split_bindings(), bound=st.integers(1, 400))
def test_bindings_passing_over_a_disk_place_as_the_reference(
    node: tuple[NodeResource, NodeResource], request: list[Binding], bound: int
) -> None:
    found = places_as_the_reference(node, request, bound)
    event(f"plans: {'none' if not found else 'bound' if len(found) == bound else 'some'}")


@DIFFERENTIAL
@given(node=roomy_nodes(), request=many_bindings(), bound=st.integers(1, 400))
def test_many_bindings_place_as_the_reference(
    node: tuple[NodeResource, NodeResource], request: list[Binding], bound: int
) -> None:
    """The enumeration places a stretch of bindings at a time (running sums): the same
    plans as the reference's one binding at a time, equal bindings and quotas included."""
    found = places_as_the_reference(node, request, bound)
    assert plan_count(*node, request, bound) == len(found)
    event(f"plans: {'none' if not found else 'bound' if len(found) == bound else 'some'}")


def _grown(binding: Binding, delta: int, quota: Quota) -> Binding:
    return Binding(binding.source, binding.destination, binding.flags).with_numbers(delta, quota)


@DIFFERENTIAL
@given(
    node=nodes(),
    old_request=requests(),
    new_bindings=requests(first=10),
    changes=st.lists(st.tuples(st.integers(0, 3), st.integers(-30, 30), small_quotas), max_size=3),
)
def test_affinity_equals_the_reference(
    node: tuple[NodeResource, NodeResource],
    old_request: list[Binding],
    new_bindings: list[Binding],
    changes: list[tuple[int, int, Quota]],
) -> None:
    """The old workload is the first plan of ``old_request`` on the node, committed to its
    usage; the realloc adds new bindings and grows or shrinks old ones."""
    capacity, usage = node
    old_plans = volume_plans(capacity, usage, old_request, 1)
    if not old_plans:
        event("affinity: no old plan")
        return
    old = old_plans[0]
    usage = applied(usage, [old])
    if not usage_is_valid(capacity, usage):
        event("affinity: old plan overfills")
        return
    delta = list(new_bindings)
    for index, size, quota in changes:
        if old_request:
            delta.append(_grown(old_request[index % len(old_request)], size, quota))
    merged = [b for b in merge(delta, old_request) if not (b.monopoly and b.size <= 0)]
    found: object
    try:
        charged = [Disk(device=device).with_quota(quota) for device, quota in old.disks.items()]
        plan = affinity_plan(capacity, usage, merged, old.volumes, charged)
        found = (plan.volumes, plan.disks)
    except PluginError:
        found = "refused"
    expected: object
    try:
        expected = reference.affinity_plan(capacity, usage, merged, old.volumes, old_request)
    except reference.Failed:
        expected = "refused"
    assert found == expected
    event(f"affinity: {'refused' if found == 'refused' else 'placed'}")


@DIFFERENTIAL
@given(node=nodes(), request=requests(), count=st.integers(1, 8), bound=st.integers(1, 50))
def test_a_deploy_places_as_the_reference_bounded_by_its_count(
    node: tuple[NodeResource, NodeResource], request: list[Binding], count: int, bound: int
) -> None:
    """calculate-deploy promotes unused volumes only as far as ``deploy_count`` needs (as
    resource-extend does): its plans are the reference's with the count as the bound. (The
    node's storage is ample: here only placement may refuse.)"""
    capacity, usage = node
    capacity = msgspec.structs.replace(capacity, storage=2**62)
    try:
        asked = normalise(request, request, 0, 0)
    except PluginError:
        event("deploy: refused as a request")
        return
    if not any(binding.needs_scheduling for binding in asked.request):
        event("deploy: nothing to place")
        return
    expected = reference.volume_plans(capacity, usage, asked.request, max(1, min(count, bound)))
    if len(expected) < count:
        with pytest.raises(NotEnoughResource, match="not enough volume plan"):
            calculate_deploy(capacity, usage, asked, count, bound)
        event("deploy: not enough plans")
        return
    answer = calculate_deploy(capacity, usage, asked, count, bound)
    planned = [workload.volume_plan_request for workload in answer.workloads_resource]
    assert planned == [volumes for volumes, _ in expected[:count]]
    event(f"deploy: {count} placed")
