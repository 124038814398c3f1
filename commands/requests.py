"""The request of every core verb, with core's field names. Unknown keys are ignored and
``null`` stands for an absent value everywhere."""

from __future__ import annotations

from typing import Annotated

import msgspec

from ledger.resources import Resource

Nodenames = Annotated[list[str], msgspec.Meta(max_length=100_000)]
Workloads = Annotated[list[Resource | None], msgspec.Meta(max_length=1_000_000)]


class NodeRequest(msgspec.Struct, kw_only=True):
    nodename: str | None = None


class NodesRequest(msgspec.Struct, kw_only=True):
    nodenames: Nodenames | None = None


class CalculateDeploy(NodeRequest, kw_only=True):
    deploy_count: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 0
    workload_resource_request: Resource | None = None


class CalculateRealloc(NodeRequest, kw_only=True):
    workload_resource: Resource | None = None
    workload_resource_request: Resource | None = None


class EngineInfo(msgspec.Struct, kw_only=True):
    """The part of core's engine info the plugin reads: ``Resources``, base64 JSON per plugin."""

    resources: dict[str, bytes] | None = msgspec.field(default=None, name="Resources")


class AddNode(NodeRequest, kw_only=True):
    resource: Resource | None = None
    info: EngineInfo | None = None


class DeployCapacity(NodesRequest, kw_only=True):
    workload_resource: Resource | None = None


class SetCapacity(NodeRequest, kw_only=True):
    resource: Resource | None = None
    resource_request: Resource | None = None
    delta: bool | None = False
    incr: bool | None = False


class SetUsage(SetCapacity, kw_only=True):
    workloads_resource: Workloads | None = None


class NodeResourceInfo(NodeRequest, kw_only=True):
    workloads_resource: Workloads | None = None


class SetNodeInfo(NodeRequest, kw_only=True):
    capacity: Resource | None = None
    usage: Resource | None = None


class MetricsNode(msgspec.Struct, kw_only=True):
    podname: str | None = None
    nodename: str | None = None


class Metrics(MetricsNode, kw_only=True):
    nodes: Annotated[list[MetricsNode], msgspec.Meta(max_length=100_000)] | None = None
