"""resource-storage's verbs that change a node: each appends at most one event, in one etcd
transaction whose compare-and-swap is on the state the decision was made from."""

from __future__ import annotations

from typing import Any

from resource_extend.commands.nodes import present
from resource_extend.commands.requests import NodeRequest
from resource_extend.commands.storage import requests
from resource_extend.commands.storage.plugin import PLUGIN
from resource_extend.commands.storage.verbs import Session, verb
from resource_extend.ledger.model.names import check_node_name
from resource_extend.projections.answers import BeforeAfter, NodeResourceInfo
from resource_extend.projections.storage.events import UsageRebuilt
from resource_extend.projections.storage.state import NodeState
from resource_extend.projections.storage.verbs import decide
from resource_extend.projections.storage.verbs.updates import Given, chosen
from resource_extend.projections.storage.views import state_json
from resource_extend.projections.storage.wire.node_requests import node_request_of
from resource_extend.projections.storage.wire.resources import NodeResource
from resource_extend.projections.storage.wire.stored import node_resource_of

ENGINE_INFO_KEY = PLUGIN.kind
"""Where a VM engine's node report carries its volumes and storage (stored form, base64)."""


def _shown(state: NodeState | None) -> dict[str, Any]:
    """A node's state a verb required, as its answers show it."""
    return state_json(present(state))


def _before_after(
    session: Session, before: NodeState | None, after: NodeState | None, side: str
) -> BeforeAfter[NodeResource]:
    """A capacity or usage edit's answer, as upstream's deep copies write it: a ``null`` volume
    map or disk list empty (a record written before this release, or left as it was); a node
    with no record, before or after (an edit that changed nothing of it), is the empty one."""
    was, now = (state_json(session.kind.as_read(state))[side] for state in (before, after))
    return BeforeAfter(before=was.filled(), after=now.filled())


def _given(request: requests.SetCapacity) -> Given | None:
    """One input wins: ``resource_request`` (either form), then ``resource`` (stored form)."""
    asked = node_request_of(request.resource_request, "resource_request")
    stored = None if request.resource is None else node_resource_of(request.resource, "resource")
    return chosen(asked, stored)


@verb(requests.AddNode)
def add_node(request: requests.AddNode, session: Session) -> dict[str, Any]:
    """Register a node's volumes, disks and storage.

    \b
    stdin   {"nodename": "n1", "resource": {"volumes": ["/data0:1T"], "storage": "2T",
             "disks": ["/dev/vda:/,/data0:1000:1000:1G:1G"]},
             "info": {"Resources": {"storage": "<base64 stored resource>"}}}
    stdout  {"capacity": R, "usage": R}

    storage is the explicit figure plus the volumes; without either, 80 % of the engine's
    storage: a VM engine's Resources["storage"] when it sends one, else info.StorageTotal.
    Volumes and disks the request leaves out come from the engine's report. Fails if the
    node exists. Appends a node_added event.
    """
    node = check_node_name(request.nodename)
    given = node_request_of(request.resource, "resource")
    info = request.info
    engine = (info.resources or {}).get(ENGINE_INFO_KEY) if info else None
    total = info.storage_total if info else 0
    appended = session.append(
        node,
        lambda s: decide.add_node(
            node, s, given, engine or None, reported=info is not None, storage_total=total
        ),
    )
    return _shown(appended.after)


@verb(NodeRequest)
def remove_node(request: NodeRequest, session: Session) -> None:
    """Forget a node; its event stream stays for auditors.

    \b
    stdin   {"nodename": "n1"}
    stdout  null

    Removing a missing node succeeds and appends nothing.
    """
    node = check_node_name(request.nodename)
    session.append(node, decide.remove_node)


@verb(requests.SetCapacity)
def set_node_resource_capacity(request: requests.SetCapacity, session: Session) -> BeforeAfter[Any]:
    """Change a node's volumes, disks and storage: add or subtract, or replace.

    \b
    stdin   {"nodename": "n1", "resource_request": {"volumes": ["/data4:1T"], "storage": "1T",
             "disks": [...], "rm-disks": "/dev/vdb"}, "resource": R, "delta": true,
             "incr": true}
    stdout  {"before": R, "after": R}            (capacity)

    delta=true adds (incr=true) or subtracts, negative sizes subtract, and a volume left at
    exactly 0 is removed. delta=false replaces: keys the request leaves out keep their value,
    rm-disks removes disks, and a stored-form value (the "before" core hands back to roll a
    change back) becomes the capacity as it is. A volume with bytes in use is never removed.
    A node with no record (one that predates the plugin) is an empty one, and the edit
    creates its record: how "eru-cli node set" gives such a node its volumes.
    """
    node = check_node_name(request.nodename)
    given = _given(request)
    delta, incr = bool(request.delta), bool(request.incr)
    appended = session.append(
        node,
        lambda s: decide.set_capacity(node, s, given, delta=delta, incr=incr),
    )
    return _before_after(session, appended.before, appended.after, "capacity")


@verb(requests.SetUsage)
def set_node_resource_usage(request: requests.SetUsage, session: Session) -> BeforeAfter[Any]:
    """Take or give back volumes, storage and disk quota on a node.

    \b
    stdin   {"nodename": "n1", "workloads_resource": [W, ...], "resource_request": R,
             "resource": R, "delta": true, "incr": true}
    stdout  {"before": R, "after": R}            (usage)

    One input wins: resource_request, then resource, then the sum of the workloads' request
    plans, storage and disks. A write that would take a volume or a disk quota past its
    capacity, or anything below zero, is refused and writes nothing. A node with no record
    is an empty one, and the edit creates its record.
    """
    node = check_node_name(request.nodename)
    given = _given(request)
    workloads = request.workloads_resource
    delta, incr = bool(request.delta), bool(request.incr)
    appended = session.append(
        node,
        lambda s: decide.set_usage(node, s, given, workloads, delta=delta, incr=incr),
    )
    return _before_after(session, appended.before, appended.after, "usage")


@verb(requests.SetNodeInfo)
def set_node_resource_info(request: requests.SetNodeInfo, session: Session) -> None:
    """Overwrite a node's capacity and usage (stored form, as given); creates the node.

    \b
    stdin   {"nodename": "n1", "capacity": R, "usage": R}
    stdout  null

    Core sends it to undo a node removal, with what get-node-resource-info read: both null
    for a node this plugin never had, which writes nothing.
    """
    node = check_node_name(request.nodename)
    capacity = None if request.capacity is None else node_resource_of(request.capacity, "capacity")
    usage = None if request.usage is None else node_resource_of(request.usage, "usage")
    session.append(node, lambda s: decide.set_info(s, capacity, usage))


@verb(requests.NodeWorkloads)
def fix_node_resource(request: requests.NodeWorkloads, session: Session) -> NodeResourceInfo[Any]:
    """Rebuild a node's usage from the workloads core knows on it.

    \b
    stdin   {"nodename": "n1", "workloads_resource": [W, ...]}
    stdout  {"capacity": R, "usage": R, "diffs": ["...", ...]}

    When usage differs from the workloads' sums it is set to them, in a usage_rebuilt event
    that records the diffs. A write that fails fails the verb. An unknown node is an error.
    """
    node = check_node_name(request.nodename)
    workloads = request.workloads_resource or []
    appended = session.append(node, lambda s: decide.rebuild_usage(node, s, workloads))
    rebuilt = [e.change for e in appended.events if isinstance(e.change, UsageRebuilt)]
    return NodeResourceInfo(**_shown(appended.after), diffs=rebuilt[0].diffs if rebuilt else [])
