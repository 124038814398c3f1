"""The apple kind's core verbs that write (what ``commands/<kind>/writes.py`` is for a kind of
the product): each appends at most one event, through the Session, as GPU's do."""

from __future__ import annotations

import functools
from typing import Any

from resource_extend.commands import protocol
from resource_extend.commands import requests as shapes
from resource_extend.commands.nodes import present
from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.ledger.model.names import check_node_name
from resource_extend.projections.answers import BeforeAfter, NodeResourceInfo
from resource_extend.projections.changes import UsageRebuilt
from tests.apples import Apples, eat, plant, recount

Session = protocol.Session[Apples]
verb = functools.partial(protocol.verb, epilog="R is a number of apples.")

AddNode = shapes.AddNode[int]
SetUsage = shapes.SetUsage[int, int, int]
NodeWorkloads = shapes.NodeWorkloads[int]


def shown(state: Apples) -> dict[str, Any]:
    return {"capacity": state.capacity, "usage": state.usage}


@verb(AddNode)
def add_node(request: AddNode, session: Session) -> dict[str, Any]:
    """Plant a node's apples."""
    node = check_node_name(request.nodename)
    return shown(present(session.append(node, plant(request.resource or 0, node)).after))


@verb(SetUsage)
def set_node_resource_usage(request: SetUsage, session: Session) -> BeforeAfter[int]:
    """Eat apples (incr=true) or give them back."""
    node = check_node_name(request.nodename)
    if not request.delta:
        raise InvalidRequest("apples are only eaten or given back: delta must be true")
    given = (
        request.resource_request
        or request.resource
        or sum(n or 0 for n in request.workloads_resource or [])
    )
    appended = session.append(node, eat(given if request.incr else -given, node))
    return BeforeAfter(before=present(appended.before).usage, after=present(appended.after).usage)


@verb(NodeWorkloads)
def fix_node_resource(request: NodeWorkloads, session: Session) -> NodeResourceInfo[int]:
    """Recount what is eaten from the workloads."""
    node = check_node_name(request.nodename)
    held = sum(n or 0 for n in request.workloads_resource or [])
    appended = session.append(node, recount(held, node))
    rebuilt = [e.change for e in appended.events if isinstance(e.change, UsageRebuilt)]
    state = present(appended.after)
    return NodeResourceInfo(**shown(state), diffs=rebuilt[0].diffs if rebuilt else [])
