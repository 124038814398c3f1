"""How a verb reads the nodes a request names: every name checked, and a node with no record
read as the kind's empty record (``projections.node.NodeKind.as_read``), whatever the kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from msgspec import Struct

from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.requests import Metrics
from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.ledger.model.names import check_node_name
from resource_extend.projections.metrics import Metric


def node_names(names: list[str] | None) -> list[str]:
    """The request's node names, each checked; at least one is required."""
    if not names:
        raise InvalidRequest("node name is empty (nodenames lists no node)")
    return [check_node_name(name) for name in names]


S = TypeVar("S", bound=Struct)
"""The kind's node state."""


def read_state(session: Session[S], node: str) -> S:
    """The node's state, the empty record for a node with none."""
    return session.kind.as_read(session.reads.records.state(node))


def read_states(session: Session[S], names: list[str]) -> dict[str, S]:
    """All named nodes' states, in the order given, the empty record for a node with none."""
    found = session.reads.records.read_many(names)
    return {node: session.kind.as_read(found.get(node)) for node in names}


def present(state: S | None) -> S:
    """The state of a node a verb required or created (it returned, so the node is there)."""
    assert state is not None, "a verb that requires the node returned without it"
    return state


def resource_info_map(
    session: Session[S], names: list[str] | None, shown: Callable[[S], Answer]
) -> dict[str, Answer]:
    """get-nodes-resource-info's answer: each named node, as ``shown``."""
    states = read_states(session, [check_node_name(name) for name in names or []])
    return {"node_resource_info_map": {node: shown(state) for node, state in states.items()}}


def metrics_of(
    session: Session[S], request: Metrics, node_metrics: Callable[[str, str, S], list[Metric]]
) -> list[Metric]:
    """get-metrics' answer: one node's gauges, or, in the batched form, those of each node
    named."""
    if request.nodes is None:
        node = check_node_name(request.nodename)
        return node_metrics(request.podname or "", node, read_state(session, node))
    wanted = [(item.podname or "", check_node_name(item.nodename)) for item in request.nodes]
    states = read_states(session, [node for _, node in wanted])
    return [
        metric for podname, node in wanted for metric in node_metrics(podname, node, states[node])
    ]
