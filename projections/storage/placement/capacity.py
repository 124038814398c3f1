"""get-nodes-deploy-capacity: how many copies of a request each node can host."""

from __future__ import annotations

from collections.abc import Iterable

from resource_extend.projections import answers
from resource_extend.projections.answers import DeployCapacity, NodesDeployCapacity
from resource_extend.projections.storage.placement.plans import (
    MAX_PLACED_BINDINGS,
    bindings_each,
    storage_fits,
)
from resource_extend.projections.storage.placement.schedule import schedule
from resource_extend.projections.storage.placement.scheduler_view import (
    Classes,
    build_host,
    classify,
)
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadRequest


def deploy_capacity(
    capacity: NodeResource,
    usage: NodeResource,
    request: WorkloadRequest,
    bound: int,
    classes: Classes | None = None,
) -> DeployCapacity:
    """The plan count with ``bound`` (upstream's placement algorithm), capped by the storage left.
    A request with nothing to place is counted ``bound`` by the scheduler, so a storage-only
    request is capped by ``bound`` too, as in resource-extend (the older plugin counted it by
    storage alone). A request with bindings is capped too by how many copies one
    calculate-deploy answers (``MAX_PLACED_BINDINGS``). ``classes`` is
    ``classify(request.request)``, when known."""
    bindings = classify(request.request) if classes is None else classes
    count = schedule(build_host(capacity, usage), bindings, bound).count
    if request.storage_request > 0:
        count = min(count, storage_fits(capacity, usage, request.storage_request))
    if each := bindings_each(request):
        count = min(count, MAX_PLACED_BINDINGS // each)  # what one calculate-deploy may answer
    used, rate = _usage(capacity, usage, request, bindings.asked)
    return DeployCapacity.of(count, used, rate)


def _usage(
    capacity: NodeResource, usage: NodeResource, request: WorkloadRequest, asked: int
) -> tuple[float, float]:
    """(Usage, Rate): by volumes when the request binds any or asks no storage, else by
    storage; 0 for a node with neither. ``asked``: the request bindings' sizes."""
    volumes = sum((capacity.volumes or {}).values())
    if volumes == 0 and capacity.storage == 0:
        return 0.0, 0.0
    if request.request or request.storage_request == 0:
        used = sum((usage.volumes or {}).values())
        return _ratio(used, volumes), _ratio(asked, volumes)
    return (
        _ratio(usage.storage, capacity.storage),
        _ratio(request.storage_request, capacity.storage),
    )


def _ratio(part: int, whole: int) -> float:
    """Upstream's ``AdvancedDivide``: 0 when either side is 0."""
    return part / whole if part and whole else 0.0


def nodes_deploy_capacity(
    nodes: Iterable[tuple[str, NodeResource, NodeResource]], request: WorkloadRequest, bound: int
) -> NodesDeployCapacity:
    """Every node's capacity, in the order given; nodes that host none are left out. The
    request's bindings are classified (and so checked) once, at the first node."""
    classes: Classes | None = None

    def entry(capacity: NodeResource, usage: NodeResource) -> DeployCapacity:
        nonlocal classes
        if classes is None:
            classes = classify(request.request)
        return deploy_capacity(capacity, usage, request, bound, classes)

    return answers.nodes_deploy_capacity(
        (name, entry(capacity, usage)) for name, capacity, usage in nodes
    )
