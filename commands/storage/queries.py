"""resource-storage's verbs that only read: they never write to etcd."""

from __future__ import annotations

from typing import Any

from resource_extend.commands.nodes import (
    metrics_of,
    node_names,
    read_state,
    read_states,
    resource_info_map,
)
from resource_extend.commands.requests import Metrics, NodesRequest
from resource_extend.commands.storage import requests
from resource_extend.commands.storage.verbs import Session, verb
from resource_extend.ledger.model.names import check_node_name
from resource_extend.projections.answers import MostIdle, NodeResourceInfo, NodesDeployCapacity
from resource_extend.projections.metrics import Metric
from resource_extend.projections.storage.wire.requests import (
    parse_workload_request,
    workload_request,
)
from resource_extend.projections.storage.wire.resources import WorkloadResource

TYPE_CHECKING = False  # the plans load only with the verbs that place
if TYPE_CHECKING:
    from resource_extend.projections.storage.placement.plans import DeployAnswer, ReallocAnswer

IDLE_PRIORITY = 1
"""get-most-idle-node's priority: below cpumem's and GPU's 100, so storage never picks the
build node (upstream's answer)."""


def _bound(session: Session) -> int:
    """``scheduler.max_deploy_count``: the most plans one placement enumerates."""
    return session.config.scheduler.max_deploy_count


@verb(requests.CalculateDeploy)
def calculate_deploy(request: requests.CalculateDeploy, session: Session) -> DeployAnswer:
    """Place deploy_count workloads of one request on a node (never writes).

    \b
    stdin   {"nodename": "n1", "deploy_count": 2, "workload_resource_request":
             {"volumes-request": ["AUTO:/data:rw:100G"], "volumes-limit": [...],
              "storage-request": "10G", "storage-limit": "10G"}}
    stdout  {"engines_params": [P, ...], "workloads_resource": [W, ...]}

    AUTO bindings are placed on the node's volumes (best fit; a monopoly binding, flag m,
    takes an unused volume whole), disk quota on the disk serving each path. Fails with "not
    enough storage" or "not enough volume plan" when deploy_count do not fit. Each
    destination is bound once, as an absolute, clean path (no ".", "..", "//" or trailing
    "/"); a mount's source is a clean absolute path or a volume name; flag o needs r or w.
    A node with no record is an empty one: it hosts requests without bindings or storage.
    """
    from resource_extend.projections.storage.placement.plans import calculate_deploy as plan

    node = check_node_name(request.nodename)
    wanted = workload_request(request.workload_resource_request)
    state = read_state(session, node)
    return plan(state.capacity, state.usage, wanted, request.deploy_count, _bound(session))


@verb(requests.CalculateRealloc)
def calculate_realloc(request: requests.CalculateRealloc, session: Session) -> ReallocAnswer:
    """Change a workload's bindings and storage (never writes).

    \b
    stdin   {"nodename": "n1", "workload_resource": W, "workload_resource_request": Q}
    stdout  {"engine_params": P, "workload_resource": W, "delta_resource": W}

    The request's bindings and storage are added to the workload's (a binding whose size
    ends below zero is removed, and the storage falls by what it held; only a binding the
    workload holds can be given back). Bindings that stay keep their volume when they still
    fit; the rest are placed anew, under the rules of calculate-deploy. Disk quota goes back
    to the device it was charged to. delta_resource is what core adds to the node's usage.
    A node with no record is an empty one.
    """
    from resource_extend.projections.storage.placement.plans import calculate_realloc as plan

    node = check_node_name(request.nodename)
    asked = parse_workload_request(request.workload_resource_request)
    current = request.workload_resource or WorkloadResource()
    state = read_state(session, node)
    return plan(state.capacity, state.usage, current, asked)


@verb(requests.DeployCapacity)
def get_nodes_deploy_capacity(
    request: requests.DeployCapacity, session: Session
) -> NodesDeployCapacity:
    """How many workloads of a request each node can host (never writes).

    \b
    stdin   {"nodenames": ["n1", ...], "workload_resource": Q}
    stdout  {"nodes_deploy_capacity_map": {"n1": {"Capacity": 4, "Usage": 0.1,
             "Rate": 0.25, "Weight": 1}}, "total": 4}

    Capacity is the number of placements (at most scheduler.max_deploy_count), capped by
    the storage left; a request without volume bindings needs no placement, and its
    capacity is the storage left divided by the request, at most scheduler.max_deploy_count
    too, as in resource-extend. Nodes that fit none are left out. A node with no record
    (added before the plugin was installed, say) is an empty one: it hosts only requests
    that ask for nothing of it.
    """
    from resource_extend.projections.storage.placement.capacity import nodes_deploy_capacity

    names = node_names(request.nodenames)
    wanted = workload_request(request.workload_resource)
    states = read_states(session, names)
    nodes = ((name, state.capacity, state.usage) for name, state in states.items())
    return nodes_deploy_capacity(nodes, wanted, _bound(session))


@verb(requests.NodeWorkloads)
def get_node_resource_info(
    request: requests.NodeWorkloads, session: Session
) -> NodeResourceInfo[Any] | None:
    """A node's capacity and usage, with every way usage disagrees with its workloads.

    \b
    stdin   {"nodename": "n1", "workloads_resource": [W, ...]}
    stdout  {"capacity": R, "usage": R, "diffs": ["...", ...]}, or null for an unknown node

    An unknown node reads as null, as in resource-gpu (upstream failed): core's RemoveNode
    reads every plugin's record first, so a node this plugin never saw can still be removed.
    """
    from resource_extend.projections.storage.verbs.diffs import node_diffs
    from resource_extend.projections.storage.views import state_json

    node = check_node_name(request.nodename)
    state = session.reads.records.state(node)
    if state is None:
        return None
    diffs = node_diffs(node, state, request.workloads_resource or [])
    return NodeResourceInfo(**state_json(state), diffs=diffs)


@verb(NodesRequest)
def get_nodes_resource_info(request: NodesRequest, session: Session) -> dict[str, Any]:
    """Capacity and usage of many nodes at once (a node with no record as an empty one).

    \b
    stdin   {"nodenames": ["n1", ...]}
    stdout  {"node_resource_info_map": {"n1": {"capacity": R, "usage": R}}}
    """
    from resource_extend.projections.storage.views import state_json

    return resource_info_map(session, request.nodenames, state_json)


@verb(NodesRequest)
def get_most_idle_node(request: NodesRequest, session: Session) -> MostIdle:
    """The first node named, with priority 1: storage leaves the choice of a build node to
    the other plugins (their priority is 100). Reads nothing.

    \b
    stdin   {"nodenames": ["n1", ...]}
    stdout  {"nodename": "n1", "priority": 1}
    """
    return MostIdle(nodename=node_names(request.nodenames)[0], priority=IDLE_PRIORITY)


@verb(Metrics)
def get_metrics(request: Metrics, session: Session) -> list[Metric]:
    """The storage_used and storage_capacity gauges of a node.

    \b
    stdin   {"podname": "p", "nodename": "n1"}   or   {"nodes": [{"podname", "nodename"}, ...]}
    stdout  [{"name": "storage_used", "labels": [pod, node],
              "key": "core.node.<node>.storage.used", "value": "1024"}, ...]

    Dots in the node name become underscores in the statsd key. A node with no record is an
    empty one: both gauges at 0.
    """
    from resource_extend.projections.storage.metrics import node_metrics

    return metrics_of(session, request, node_metrics)
