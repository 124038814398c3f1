"""Verbs that change a node: each appends at most one event, in one etcd transaction."""

from __future__ import annotations

from typing import Any

import msgspec

from resource_extend.commands.gpu import requests
from resource_extend.commands.gpu.answers import node_resources, workloads_sum
from resource_extend.commands.gpu.plugin import PLUGIN
from resource_extend.commands.gpu.verbs import Session, verb
from resource_extend.commands.nodes import present
from resource_extend.commands.requests import EngineInfo, NodeRequest
from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.ledger.model.names import check_node_name
from resource_extend.projections.answers import BeforeAfter, NodeResourceInfo
from resource_extend.projections.gpu import cards, decide
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.events import UsageRebuilt
from resource_extend.projections.gpu.resources import (
    Resource,
    held_cards,
    positive_cards,
    signed_cards,
)

ENGINE_INFO_KEYS = (PLUGIN.name, PLUGIN.kind)
"""Where a VM engine's node report carries its GPU cards, in order of preference."""


def _capacity_from_info(info: EngineInfo | None) -> Cards:
    for key in ENGINE_INFO_KEYS:
        raw = (info.resources or {}).get(key) if info else None
        if raw:
            what = f"info.Resources[{key!r}]"
            try:
                reported = requests.decode(raw, Resource)
            except msgspec.DecodeError as exc:  # ValidationError included
                raise InvalidRequest(f"{what} is not a GPU map: {exc}") from None
            return positive_cards(reported, what)
    return {}


@verb(requests.AddNode)
def add_node(request: requests.AddNode, session: Session) -> dict[str, Any]:
    """Register a node and its cards.

    \b
    stdin   {"nodename": "n1", "resource": R, "info": {"Resources": {"gpu": "<base64 R>"}}}
    stdout  {"capacity": R, "usage": R}

    The cards come from "resource"; when it has none, from the engine's report (a VM engine
    sends "resource-gpu" or "gpu" in info.Resources); otherwise the node has no GPU. Fails if
    the node exists. Appends a node_added event.
    """
    node = check_node_name(request.nodename)
    given = positive_cards(request.resource, "resource") or _capacity_from_info(request.info)
    appended = session.append(node, lambda s: decide.add_node(node, s, given))
    assert appended.after is not None
    return node_resources(appended.after)


@verb(NodeRequest)
def remove_node(request: NodeRequest, session: Session) -> dict[str, Any]:
    """Forget a node; its event stream stays for auditors.

    \b
    stdin   {"nodename": "n1"}
    stdout  {}

    Removing a missing node succeeds and appends nothing. Adding the node again continues its
    stream.
    """
    node = check_node_name(request.nodename)
    session.append(node, decide.remove_node)
    return {}


def _input(request: requests.SetCapacity, workloads: Cards | None = None) -> Resource | None:
    """One input wins: resource_request, then resource (then, for usage, the workloads)."""
    if request.resource_request is not None:
        return request.resource_request.as_resource()
    if request.resource is not None:
        return request.resource
    return None if workloads is None else Resource.of(workloads)


def _before_after(before: Cards, after: Cards) -> BeforeAfter[Resource]:
    return BeforeAfter(before=Resource.of(before), after=Resource.of(after))


def _checked(resource: Resource | None, what: str, *, delta: bool) -> Cards:
    return signed_cards(resource, what) if delta else held_cards(resource, what)


@verb(requests.SetCapacity)
def set_node_resource_capacity(
    request: requests.SetCapacity, session: Session
) -> BeforeAfter[Resource]:
    """Change a node's cards: add or subtract, or replace.

    \b
    stdin   {"nodename": "n1", "resource_request": R, "resource": R,
             "delta": true, "incr": true}
    stdout  {"before": R, "after": R}            (capacity)

    One input wins: resource_request, then resource. delta=true adds (incr=true) or subtracts
    (incr=false), and negative counts subtract; delta=false replaces the capacity (core's
    rollback sends the "before" it got back), except that a resource_request without
    "prod_count_map" ({}, as "node set" sends for no change) keeps it, as upstream does. A
    replace names only products it keeps (a count of 0 is refused). No product may end below
    zero; capacity below usage is allowed. A node with no record (one that predates the
    plugin) is an empty one, and the edit creates its record: how "eru-cli node set" gives
    such a node its cards.
    """
    node = check_node_name(request.nodename)
    delta = bool(request.delta)
    asked = request.resource_request
    keep = not delta and asked is not None and not asked.names_cards
    # A replace names the cards the node has: a product with 0 would silently drop it (the
    # seed refuses counts of zero or less outside a realloc).
    checked = signed_cards if delta else positive_cards
    given = None if keep else checked(_input(request), "capacity")
    appended = session.append(
        node,
        lambda s: decide.set_capacity(node, s, given, delta=delta, incr=bool(request.incr)),
    )
    before, after = map(session.kind.as_read, (appended.before, appended.after))
    return _before_after(before.capacity, after.capacity)


@verb(requests.SetUsage)
def set_node_resource_usage(request: requests.SetUsage, session: Session) -> BeforeAfter[Resource]:
    """Take or give back cards on a node.

    \b
    stdin   {"nodename": "n1", "workloads_resource": [R, ...], "resource_request": R,
             "resource": R, "delta": true, "incr": true}
    stdout  {"before": R, "after": R}            (usage)

    One input wins: resource_request, then resource, then the sum of workloads_resource.
    Deploy adds the new workloads (delta, incr=true); realloc adds its delta_resource, which
    may hold negative counts; release and rollback of a failed deploy subtract (incr=false);
    a partial-failure rollback replaces usage (delta=false). No product may end below zero,
    and a change that raises a product may not take it past the node's capacity (checked in
    the same compare-and-swap, so racing deploys cannot overfill a node); what lowers usage,
    and a replace, are never refused for capacity. A node with no record is an empty one,
    and the edit creates its record.
    """
    node = check_node_name(request.nodename)
    delta = bool(request.delta)
    workloads = [
        _checked(w, f"workloads_resource[{i}]", delta=delta)
        for i, w in enumerate(request.workloads_resource or [])
    ]
    given = _checked(_input(request, cards.sum_all(workloads)), "usage", delta=delta)
    from_workloads = request.resource_request is None and request.resource is None
    appended = session.append(
        node,
        lambda s: decide.set_usage(
            node,
            s,
            given,
            workloads=workloads if from_workloads and workloads else None,
            delta=delta,
            incr=bool(request.incr),
        ),
    )
    before, after = map(session.kind.as_read, (appended.before, appended.after))
    return _before_after(before.usage, after.usage)


@verb(requests.SetNodeInfo)
def set_node_resource_info(request: requests.SetNodeInfo, session: Session) -> dict[str, Any]:
    """Overwrite a node's capacity and usage; creates the node if it is missing.

    \b
    stdin   {"nodename": "n1", "capacity": R, "usage": R}
    stdout  {}

    Core sends it to undo a failed node removal, with what get-node-resource-info read. Both
    name only the products the node has: a count of 0 (or less) is refused, as upstream
    refuses it, and nothing is written.
    """
    node = check_node_name(request.nodename)
    capacity = positive_cards(request.capacity, "capacity")
    usage = positive_cards(request.usage, "usage")
    session.append(node, lambda s: decide.set_info(s, capacity, usage))
    return {}


@verb(requests.NodeWorkloads)
def fix_node_resource(
    request: requests.NodeWorkloads, session: Session
) -> NodeResourceInfo[Resource]:
    """Rebuild a node's usage from the workloads core knows on it.

    \b
    stdin   {"nodename": "n1", "workloads_resource": [R, ...]}
    stdout  {"capacity": R, "usage": R, "diffs": ["...", ...]}

    When usage differs from the sum of the workloads it is set to that sum, in a
    usage_rebuilt event that records the diffs. A write that fails fails the verb, so core
    keeps its repair entry. An unknown node is an error.
    """
    node = check_node_name(request.nodename)
    held = workloads_sum(request.workloads_resource)
    appended = session.append(node, lambda s: decide.rebuild_usage(node, s, held))
    rebuilt = [e.change for e in appended.events if isinstance(e.change, UsageRebuilt)]
    diffs = rebuilt[0].diffs if rebuilt else []
    return NodeResourceInfo(**node_resources(present(appended.after)), diffs=diffs)
