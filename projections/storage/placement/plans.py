"""The pure answers of calculate-deploy and calculate-realloc."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest, NotEnoughResource, PluginError
from resource_extend.projections.answers import DeployPlans, ReallocPlan
from resource_extend.projections.storage.arithmetic import added_disks
from resource_extend.projections.storage.grammar.bindings import (
    Binding,
    InvalidVolume,
    check_added,
    merge,
    parse_bindings,
)
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.grammar.sizes import go_div
from resource_extend.projections.storage.placement import workloads
from resource_extend.projections.storage.placement.affinity import affinity_plan
from resource_extend.projections.storage.placement.schedule import Plan, schedule
from resource_extend.projections.storage.placement.scheduler_view import build_host
from resource_extend.projections.storage.wire.requests import ParsedWorkloadRequest, normalise
from resource_extend.projections.storage.wire.resources import (
    EngineParams,
    NodeResource,
    VolumePlan,
    WorkloadRequest,
    WorkloadResource,
)

INSUFFICIENT = "cannot alloc a plan, not enough resource"
"""Core's ``ErrInsufficientResource``, which upstream wraps its reasons around."""

FAKE_BINDING = "fake-source:fake-destination:fake-flags:0:0:0:0:0"
"""The one key of a realloc delta's plan, under which every path's change is listed."""


DeployAnswer = DeployPlans[EngineParams, WorkloadResource]
ReallocAnswer = ReallocPlan[EngineParams, WorkloadResource]


def storage_fits(capacity: NodeResource, usage: NodeResource, request: int) -> int:
    """How many copies of a storage request the node's storage left holds (Go's truncating
    division: a node already over its storage holds none)."""
    return go_div(capacity.storage - usage.storage, request)


MAX_PLACED_BINDINGS = 1 << 20
"""The most bindings one calculate-deploy answer may hold (``deploy_count`` times the request's
bindings): 1,000 workloads of 1,024 bindings answer in about 90 MB; ten times that would take
core's 30 s and a gigabyte of memory, so it is refused up front."""


def bindings_each(request: WorkloadRequest) -> int:
    """How many bindings each copy of ``request`` places in a deploy answer."""
    return max(len(request.request), len(request.limit))


def calculate_deploy(
    capacity: NodeResource,
    usage: NodeResource,
    request: WorkloadRequest,
    deploy_count: int,
    bound: int,
) -> DeployAnswer:
    """``deploy_count`` workloads of ``request`` on this node, with upstream's errors:
    storage is checked first, then the volume plans. The placement is bounded by
    ``deploy_count`` (within ``bound``), as resource-extend bounds it: unused volumes are
    promoted only as far as these copies need, and the rest stay whole for later monopoly
    requests. Workloads placed alike share one answer: the work is the distinct placements',
    not ``deploy_count`` times the bindings."""
    placed = deploy_count * bindings_each(request)
    if placed > MAX_PLACED_BINDINGS:
        raise InvalidRequest(
            f"deploy_count {deploy_count} of {bindings_each(request)} bindings each is "
            f"{placed} bindings in one answer, more than {MAX_PLACED_BINDINGS}: deploy fewer "
            "workloads a call"
        )
    if request.storage_request > 0:
        available = storage_fits(capacity, usage, request.storage_request)
        if available < deploy_count:
            raise NotEnoughResource(  # upstream's words: bytes a workload, then a count of them
                f"not enough storage, request: {request.storage_request}, "
                f"available: {available}: {INSUFFICIENT}"
            )
    if any(binding.needs_scheduling for binding in request.request):
        needed = max(1, min(deploy_count, bound))
        found = schedule(build_host(capacity, usage), request.request, needed)
        if found.count < deploy_count:
            raise NotEnoughResource(
                f"not enough volume plan, need {deploy_count}, available {found.count}: "
                f"{INSUFFICIENT}"
            )
        plans = found.plans(deploy_count)
    else:
        plans = [Plan(volumes={}, disks={})] * deploy_count
    deployed = _Deployer(capacity, request)
    answer = DeployAnswer(engines_params=[], workloads_resource=[])
    for plan in plans:
        engine, resource = deployed(plan)
        answer.engines_params.append(engine)
        answer.workloads_resource.append(resource)
    return answer


class _Deployer:
    """One request's engine params and workload resource for each plan, each distinct plan
    worked out once (the request's canonical bindings once for all)."""

    def __init__(self, capacity: NodeResource, request: WorkloadRequest) -> None:
        self.disks = capacity.disks or []
        self.request = request
        self.limit = list(request.limit)
        self.volumes_request = [b.canonical() for b in request.request]
        self.volumes_limit = [b.canonical() for b in self.limit]
        self.done: dict[bytes, tuple[EngineParams, WorkloadResource]] = {}

    def __call__(self, plan: Plan) -> tuple[EngineParams, WorkloadResource]:
        key = msgspec.json.encode(plan)
        if key not in self.done:
            self.done[key] = self._deployed(plan)
        return self.done[key]

    def _deployed(self, plan: Plan) -> tuple[EngineParams, WorkloadResource]:
        request, limit = self.request, self.limit
        # Upstream's quirk: the limit plan holds the planned (request) sizes.
        plan_limit = workloads.plan_limit(limit, limit, plan.volumes)
        disks_limit = workloads.disks_limit(limit, plan_limit, self.disks)
        engine = EngineParams(
            volumes=workloads.engine_volumes(workloads.applied(limit, plan.volumes)),
            storage=request.storage_limit,
            iops_options=workloads.iops_options(disks_limit),
        )
        resource = WorkloadResource(
            volumes_request=self.volumes_request,
            volumes_limit=self.volumes_limit,
            volume_plan_request=plan.volumes,
            volume_plan_limit=plan_limit,
            storage_request=request.storage_request,
            storage_limit=request.storage_limit,
            disks_request=workloads.disk_list(plan.disks, self.disks),
            disks_limit=disks_limit,
        )
        return engine, resource


def calculate_realloc(
    capacity: NodeResource,
    usage: NodeResource,
    current: WorkloadResource,
    asked: ParsedWorkloadRequest,
) -> ReallocAnswer:
    """The workload ``current`` changed by ``asked`` (deltas: sizes and quotas add, a binding
    merged below zero goes). Raises :class:`InvalidRequest` for a merged request that breaks
    upstream's validation rules, and :class:`NotEnoughResource` when it does not fit."""
    current_request = parse_bindings(current.volumes_request)
    current_limit = parse_bindings(current.volumes_limit)
    merged, reschedule = _merged(current, current_request, current_limit, asked)
    if merged.storage_request - current.storage_request > capacity.storage - usage.storage:
        raise NotEnoughResource(INSUFFICIENT)
    if reschedule:
        volumes, disks_request = _placed_again(capacity, usage, merged, current)
    else:  # our fix of an upstream bug: the workload keeps its disks
        volumes, disks_request = current.volume_plan_request, current.disks_request
    limit = list(merged.limit)
    plan_limit = workloads.plan_limit(merged.request, limit, volumes)
    disks_limit = workloads.disks_limit(limit, plan_limit, capacity.disks or [])
    new = WorkloadResource(
        volumes_request=[b.canonical() for b in merged.request],
        volumes_limit=[b.canonical() for b in limit],
        volume_plan_request=volumes,
        volume_plan_limit=plan_limit,
        storage_request=merged.storage_request,
        storage_limit=merged.storage_limit,
        disks_request=disks_request,
        disks_limit=disks_limit,
    )
    placed = workloads.applied(limit, volumes)
    engine = EngineParams(
        volumes=workloads.engine_volumes(placed),
        volume_changed=_volume_changed(placed, current_limit, current.volume_plan_limit),
        storage=merged.storage_limit,
        iops_options=workloads.iops_options(disks_limit),
    )
    return ReallocAnswer(
        engine_params=engine, delta_resource=_delta(current, new), workload_resource=new
    )


def _merged(
    current: WorkloadResource,
    current_request: list[Binding],
    current_limit: list[Binding],
    asked: ParsedWorkloadRequest,
) -> tuple[WorkloadRequest, bool]:
    """What the workload asks for after the change: ``asked`` merged into what it holds
    (``current``, its bindings parsed), and whether a binding of it must be placed again.
    Raises :class:`InvalidRequest` for a merge that breaks upstream's rules."""
    requested = list(asked.request) or list(asked.limit)
    for given, held in ((requested, current_request), (asked.limit, current_limit)):
        check_added(given, held)
        _refuse_giving_back_what_is_not_held(given, held)
    merged_request = merge(requested, current_request)
    # A binding the request side gave back whole goes whole: its limit side with it, though
    # that side was larger (upstream kept it, and it came back as the request).
    removed = {b.key for b in current_request} - {b.key for b in merged_request}
    merged_limit = [b for b in merge(asked.limit, current_limit) if b.key not in removed]
    # The storage follows what the bindings hold: a binding removed (merged below zero)
    # takes off what it held, not the whole give-back.
    merged = normalise(
        merged_request,
        merged_limit,
        asked.storage_request + current.storage_request + _grown(merged_request, current_request),
        asked.storage_limit + current.storage_limit + _grown(merged_limit, current_limit),
        fold_storage=False,
    )
    return merged, any(binding.needs_scheduling for binding in requested)


def _placed_again(
    capacity: NodeResource, usage: NodeResource, merged: WorkloadRequest, current: WorkloadResource
) -> tuple[VolumePlan, list[Disk] | None]:
    """Where the merged request's volumes go, keeping what the workload holds where it is
    (its affinity), and the disks they take; :class:`NotEnoughResource` when they do not fit."""
    try:
        plan = affinity_plan(
            capacity,
            usage,
            merged.request,
            current.volume_plan_request,
            current.disks_request or [],
        )
    except PluginError as exc:
        raise NotEnoughResource(f"{exc.reason}: {INSUFFICIENT}") from exc
    return plan.volumes, workloads.disk_list(plan.disks, capacity.disks or [])


def _grown(merged: Sequence[Binding], held: Sequence[Binding]) -> int:
    """How many bytes the bindings hold more after the merge than before."""
    return sum(binding.size for binding in merged) - sum(binding.size for binding in held)


def _refuse_giving_back_what_is_not_held(asked: Sequence[Binding], held: Sequence[Binding]) -> None:
    """A negative size gives back, and only a binding the workload holds has bytes to give:
    one it does not hold would be dropped by the merge and lower nothing but the storage."""
    held_keys = {binding.key for binding in held}
    for binding in asked:
        if binding.size < 0 and binding.key not in held_keys:
            raise InvalidVolume(
                f"{binding.canonical()} gives back {binding.named()}, which the workload does "
                "not hold"
            )


def _volume_changed(
    placed: Sequence[Binding], old_limit: Sequence[Binding], old_plan: VolumePlan
) -> bool:
    """Whether the engine must remount: the set of (path, destination, flags) changed. A new
    size alone does not count (as upstream's realloc)."""
    before = {b.key for b in workloads.applied(old_limit, old_plan)}
    return len(placed) != len(before) or any(b.key not in before for b in placed)


def _delta(old: WorkloadResource, new: WorkloadResource) -> WorkloadResource:
    """What the realloc changes in node usage: bytes per path (zeros kept) under one fake
    binding, the storage, and quota per device (a device only the old plan had is negated). The
    rest is left empty, as upstream's delta: ``disks_limit`` is ``null``."""
    paths: dict[str, int] = {}
    for sign, plan in ((1, new.volume_plan_request), (-1, old.volume_plan_request)):
        for placed in plan.values():
            for path, size in placed.items():
                paths[path] = paths.get(path, 0) + sign * size
    return WorkloadResource(
        volume_plan_request={FAKE_BINDING: dict(sorted(paths.items()))},
        storage_request=new.storage_request - old.storage_request,
        disks_request=_disk_delta(new.disks_request or [], old.disks_request or []),
        disks_limit=None,  # as upstream's delta leaves it
    )


def _disk_delta(new: Sequence[Disk], old: Sequence[Disk]) -> list[Disk]:
    """Per device, new minus old (a device listed twice counts twice, as in usage)."""
    return sorted(added_disks(new, old, sign=-1), key=lambda disk: disk.device)
