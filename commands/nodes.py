"""How a verb reads the nodes a request names: every name checked, an unknown node an error
(where the verb says so), whatever the kind."""

from __future__ import annotations

from typing import Any

from resource_extend.commands.protocol import Session
from resource_extend.ledger.errors import InvalidRequest, NodeNotFound
from resource_extend.ledger.keys import check_node_name


def node_names(names: list[str] | None) -> list[str]:
    """The request's node names, each checked; at least one is required."""
    if not names:
        raise InvalidRequest("node name is empty (nodenames lists no node)")
    return [check_node_name(name) for name in names]


def read_state(session: Session, node: str) -> Any:
    """The node's state; an unknown node is an error."""
    state = session.store.read(node).state
    if state is None:
        raise NodeNotFound(node)
    return state


def read_states(session: Session, names: list[str]) -> dict[str, Any]:
    """All named nodes' states, in the order given; an unknown node is an error."""
    found = session.store.read_many(names)
    for node in names:
        if node not in found:
            raise NodeNotFound(node)
    return {node: found[node] for node in names}
