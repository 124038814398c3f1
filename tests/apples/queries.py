"""The apple kind's core verb that only reads (what ``commands/<kind>/queries.py`` is for a
kind of the product)."""

from __future__ import annotations

from resource_extend.ledger.model.names import check_node_name
from resource_extend.projections.answers import NodeResourceInfo
from tests.apples.writes import NodeWorkloads, Session, shown, verb


@verb(NodeWorkloads)
def get_node_resource_info(
    request: NodeWorkloads, session: Session
) -> NodeResourceInfo[int] | None:
    """A node's apples, and whether its workloads agree with what is eaten (null: no node)."""
    node = check_node_name(request.nodename)
    state = session.store.records.state(node)
    if state is None:
        return None
    held = sum(n or 0 for n in request.workloads_resource or [])
    diffs = [] if held == state.usage else [f"{state.usage} eaten, workloads hold {held}"]
    return NodeResourceInfo(**shown(state), diffs=diffs)
