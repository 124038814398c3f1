"""Verbs that only read: they never write to etcd."""

from __future__ import annotations

from typing import Any

from resource_extend.commands.gpu import requests
from resource_extend.commands.gpu.answers import node_resources, workloads_sum
from resource_extend.commands.gpu.verbs import Session, verb
from resource_extend.commands.nodes import (
    metrics_of,
    node_names,
    read_state,
    read_states,
    resource_info_map,
)
from resource_extend.commands.requests import Metrics, NodesRequest
from resource_extend.ledger.model.names import check_node_name
from resource_extend.projections import answers
from resource_extend.projections.gpu import capacity, metrics
from resource_extend.projections.gpu.diffs import usage_diffs
from resource_extend.projections.gpu.resources import (
    Resource,
    held_cards,
    positive_cards,
    signed_cards,
)


@verb(requests.CalculateDeploy)
def calculate_deploy(
    request: requests.CalculateDeploy, session: Session
) -> answers.DeployPlans[Resource, Resource]:
    """Plan deploy_count workloads of one request on a node (never writes).

    \b
    stdin   {"nodename": "n1", "deploy_count": 2, "workload_resource_request": R}
    stdout  {"engines_params": [R, ...], "workloads_resource": [R, ...]}

    Both lists hold deploy_count copies of the request. Fails with "not enough resource" when
    they do not all fit the node's available cards (capacity minus usage). A node with no
    record is an empty one: it hosts requests without cards.
    """
    node = check_node_name(request.nodename)
    wanted = positive_cards(request.workload_resource_request, "workload_resource_request")
    plan = capacity.plan_deploy(node, read_state(session, node), wanted, request.deploy_count)
    entries = [Resource.of(c) for c in plan]
    return answers.DeployPlans(engines_params=entries, workloads_resource=entries)


@verb(requests.CalculateRealloc)
def calculate_realloc(
    request: requests.CalculateRealloc, session: Session
) -> answers.ReallocPlan[Resource, Resource]:
    """Plan a workload's new cards (never writes).

    \b
    stdin   {"nodename": "n1", "workload_resource": R, "workload_resource_request": R}
    stdout  {"engine_params": R, "workload_resource": R, "delta_resource": R}

    The request is merged into the workload's cards: negative counts give cards back, and a
    product that falls to zero or below disappears. The growth must fit the node's available
    cards. delta_resource = new - current (negative counts kept). A node with no record
    is an empty one.
    """
    node = check_node_name(request.nodename)
    current = held_cards(request.workload_resource, "workload_resource")
    change = signed_cards(request.workload_resource_request, "workload_resource_request")
    plan = capacity.plan_realloc(node, read_state(session, node), current, change)
    new = Resource.of(plan.new)
    return answers.ReallocPlan(
        engine_params=new, workload_resource=new, delta_resource=Resource.of(plan.delta)
    )


@verb(requests.DeployCapacity)
def get_nodes_deploy_capacity(
    request: requests.DeployCapacity, session: Session
) -> answers.NodesDeployCapacity:
    """How many workloads of a request each node can host (never writes).

    \b
    stdin   {"nodenames": ["n1", ...], "workload_resource": R}
    stdout  {"nodes_deploy_capacity_map": {"n1": {"Capacity": 2, "Usage": 0.25,
             "Rate": 0.125, "Weight": 1}}, "total": 2}

    Capacity is the smallest available[p] // k[p] over the requested products, or 1000000
    for a request without cards; Usage is used/total cards, Rate requested/total cards.
    Nodes that fit none are left out. A node with no record (added before the plugin was
    installed, say) is an empty one: 1000000 for a request without cards, none otherwise.
    """
    names = node_names(request.nodenames)
    wanted = positive_cards(request.workload_resource, "workload_resource")
    return capacity.nodes_deploy_capacity(read_states(session, names).items(), wanted)


@verb(requests.NodeWorkloads)
def get_node_resource_info(
    request: requests.NodeWorkloads, session: Session
) -> answers.NodeResourceInfo[Resource] | None:
    """A node's capacity and usage, with every way usage disagrees with its workloads.

    \b
    stdin   {"nodename": "n1", "workloads_resource": [R, ...]}
    stdout  {"capacity": R, "usage": R, "diffs": ["...", ...]}, or null for an unknown node
    """
    node = check_node_name(request.nodename)
    held = workloads_sum(request.workloads_resource)
    state = session.reads.records.state(node)
    if state is None:
        return None
    return answers.NodeResourceInfo(**node_resources(state), diffs=usage_diffs(state.usage, held))


@verb(NodesRequest)
def get_nodes_resource_info(request: NodesRequest, session: Session) -> dict[str, Any]:
    """Capacity and usage of many nodes at once (a node with no record as an empty one).

    \b
    stdin   {"nodenames": ["n1", ...]}
    stdout  {"node_resource_info_map": {"n1": {"capacity": R, "usage": R}}}
    """
    return resource_info_map(session, request.nodenames, node_resources)


@verb(NodesRequest)
def get_most_idle_node(request: NodesRequest, session: Session) -> answers.MostIdle:
    """The node with the lowest share of cards in use, for a build.

    \b
    stdin   {"nodenames": ["n1", ...]}
    stdout  {"nodename": "n1", "priority": 100}

    A node without cards counts as idle (0), and so does a node with no record (an empty
    one); on a tie the first by name wins.
    """
    states = read_states(session, node_names(request.nodenames))
    return answers.MostIdle(nodename=capacity.most_idle(states), priority=capacity.IDLE_PRIORITY)


@verb(Metrics)
def get_metrics(request: Metrics, session: Session) -> list[metrics.Metric]:
    """The gpu_capacity and gpu_used gauges of a node, per product in its capacity.

    \b
    stdin   {"podname": "p", "nodename": "n1"}   or   {"nodes": [{"podname", "nodename"}, ...]}
    stdout  [{"name": "gpu_capacity", "labels": [pod, node, product],
              "key": "core.node.<node>.gpu.<product>.capacity", "value": "4"}, ...]

    Dots in the node and product become underscores in the statsd key. A node with no
    record has no products, so no gauges.
    """
    return metrics_of(session, request, metrics.node_metrics)
