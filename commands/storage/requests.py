"""The request of every core verb as resource-storage reads it, with core's field names.

Unknown keys are ignored and ``null`` stands for an absent value. A node's resource may come in
either of its two forms (``{"volumes": ["/data0:1T"], "storage": "1T"}`` as an operator types
it, or the stored form core hands back), so those fields stay raw until the verb reads them
(``projections.storage.node_requests``); everything else is typed here.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from resource_extend.commands.requests import (
    MAX_WORKLOADS,
    DeployCount,
    EngineInfo,
    Metrics,
    MetricsNode,
    NodeRequest,
    NodesRequest,
)
from resource_extend.projections.storage.requests import WorkloadRequestWire
from resource_extend.projections.storage.resources import WorkloadResource

Workloads = Annotated[list[WorkloadResource | None], msgspec.Meta(max_length=MAX_WORKLOADS)]
NodeForm = Any
"""A node resource in the request form or the stored form, read by the verb."""


class AddNode(NodeRequest, kw_only=True):
    resource: NodeForm = None
    info: EngineInfo | None = None


class CalculateDeploy(NodeRequest, kw_only=True):
    deploy_count: DeployCount = 0
    workload_resource_request: WorkloadRequestWire | None = None


class CalculateRealloc(NodeRequest, kw_only=True):
    workload_resource: WorkloadResource | None = None
    workload_resource_request: WorkloadRequestWire | None = None


class DeployCapacity(NodesRequest, kw_only=True):
    workload_resource: WorkloadRequestWire | None = None
    """The request, despite its name (core's field)."""


class SetCapacity(NodeRequest, kw_only=True):
    resource: NodeForm = None
    resource_request: NodeForm = None
    delta: bool | None = False
    incr: bool | None = False


class SetUsage(SetCapacity, kw_only=True):
    workloads_resource: Workloads | None = None


class NodeResourceInfo(NodeRequest, kw_only=True):
    workloads_resource: Workloads | None = None


class SetNodeInfo(NodeRequest, kw_only=True):
    capacity: NodeForm = None
    usage: NodeForm = None


__all__ = [
    "AddNode",
    "CalculateDeploy",
    "CalculateRealloc",
    "DeployCapacity",
    "EngineInfo",
    "Metrics",
    "MetricsNode",
    "NodeRequest",
    "NodeResourceInfo",
    "NodesRequest",
    "SetCapacity",
    "SetNodeInfo",
    "SetUsage",
]
