"""resource-storage's verbs that only read: they never write to etcd."""

from __future__ import annotations

from typing import Any

from resource_extend.commands.protocol import Session, verb
from resource_extend.commands.storage import requests
from resource_extend.ledger.errors import InvalidRequest, NodeNotFound
from resource_extend.ledger.keys import check_node_name
from resource_extend.projections.metrics import Metric
from resource_extend.projections.storage import metrics
from resource_extend.projections.storage.diffs import node_diffs
from resource_extend.projections.storage.state import NodeState

IDLE_PRIORITY = 1
"""get-most-idle-node's priority: below cpumem's and GPU's 100, so storage never picks the
build node (upstream's answer)."""


def node_names(names: list[str] | None) -> list[str]:
    """The request's node names, each checked; at least one is required."""
    if not names:
        raise InvalidRequest("node name is empty (nodenames lists no node)")
    return [check_node_name(name) for name in names]


def _state(session: Session, node: str) -> NodeState:
    state: NodeState | None = session.store.read(node).state
    if state is None:
        raise NodeNotFound(node)
    return state


def _states(session: Session, names: list[str]) -> dict[str, NodeState]:
    """All named nodes' states, in the order given; an unknown node is an error."""
    found: dict[str, NodeState] = session.store.read_many(names)
    for node in names:
        if node not in found:
            raise NodeNotFound(node)
    return {node: found[node] for node in names}


def _resources(state: NodeState) -> dict[str, Any]:
    return {"capacity": state.capacity, "usage": state.usage}


@verb("get-node-resource-info", requests.NodeResourceInfo)
def get_node_resource_info(request: requests.NodeResourceInfo, session: Session) -> Any:
    """A node's capacity and usage, with every way usage disagrees with its workloads.

    \b
    stdin   {"nodename": "n1", "workloads_resource": [W, ...]}
    stdout  {"capacity": R, "usage": R, "diffs": ["...", ...]}

    An unknown node is an error (as upstream; resource-gpu prints null).
    """
    node = check_node_name(request.nodename)
    state = _state(session, node)
    return {**_resources(state), "diffs": node_diffs(node, state, request.workloads_resource or [])}


@verb("get-nodes-resource-info", requests.NodesRequest)
def get_nodes_resource_info(request: requests.NodesRequest, session: Session) -> dict[str, Any]:
    """Capacity and usage of many nodes at once (unknown nodes are left out).

    \b
    stdin   {"nodenames": ["n1", ...]}
    stdout  {"node_resource_info_map": {"n1": {"capacity": R, "usage": R}}}
    """
    names = [check_node_name(name) for name in request.nodenames or []]
    states: dict[str, NodeState] = session.store.read_many(names)
    return {"node_resource_info_map": {n: _resources(s) for n, s in states.items()}}


@verb("get-most-idle-node", requests.NodesRequest)
def get_most_idle_node(request: requests.NodesRequest, session: Session) -> dict[str, Any]:
    """The first node named, with priority 1: storage leaves the choice of a build node to
    the other plugins (their priority is 100). Reads nothing.

    \b
    stdin   {"nodenames": ["n1", ...]}
    stdout  {"nodename": "n1", "priority": 1}
    """
    return {"nodename": node_names(request.nodenames)[0], "priority": IDLE_PRIORITY}


@verb("get-metrics", requests.Metrics)
def get_metrics(request: requests.Metrics, session: Session) -> list[Metric]:
    """The storage_used and storage_capacity gauges of a node.

    \b
    stdin   {"podname": "p", "nodename": "n1"}   or   {"nodes": [{"podname", "nodename"}, ...]}
    stdout  [{"name": "storage_used", "labels": [pod, node],
              "key": "core.node.<node>.storage.used", "value": "1024"}, ...]

    Dots in the node name become underscores in the statsd key. In the batched form unknown
    nodes are skipped.
    """
    if request.nodes is None:
        node = check_node_name(request.nodename)
        return metrics.node_metrics(request.podname or "", node, _state(session, node))
    wanted = [(item.podname or "", check_node_name(item.nodename)) for item in request.nodes]
    states: dict[str, NodeState] = session.store.read_many(node for _, node in wanted)
    return [
        metric
        for podname, node in wanted
        if node in states
        for metric in metrics.node_metrics(podname, node, states[node])
    ]
