"""resource-storage's requests: the shapes of ``commands.requests`` with storage's resources.

A node's resource may come in either of its two forms (``{"volumes": ["/data0:1T"], "storage":
"1T"}`` as an operator types it, or the stored form core hands back), so those fields stay raw
until the verb reads them (``projections.storage.wire.node_requests``); everything else is typed
here. A key that spells a field in another case (``Storage_Request``) is refused
(:data:`decode`).
"""

from __future__ import annotations

import functools
from typing import Any

from resource_extend.commands import requests as shapes
from resource_extend.commands.requests import (
    CaseStrict,
    EngineInfo,
    Metrics,
    spellings,
)
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.wire.node_requests import RequestForm
from resource_extend.projections.storage.wire.requests import WorkloadRequestWire
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource
from resource_extend.projections.storage.wire.stored import exactly_spelled

NodeForm = Any
"""A node resource in the request form or the stored form, read by the verb."""

AddNode = shapes.AddNode[NodeForm]
CalculateDeploy = shapes.CalculateDeploy[WorkloadRequestWire]
CalculateRealloc = shapes.CalculateRealloc[WorkloadResource, WorkloadRequestWire]
DeployCapacity = shapes.DeployCapacity[WorkloadRequestWire]
SetCapacity = shapes.SetCapacity[NodeForm, NodeForm]
SetUsage = shapes.SetUsage[NodeForm, NodeForm, WorkloadResource]
NodeWorkloads = shapes.NodeWorkloads[WorkloadResource]
SetNodeInfo = shapes.SetNodeInfo[NodeForm]


@functools.cache
def fields() -> dict[str, str]:
    """Every field a request may hold, at any depth, by its case-folded form (made when a
    request first needs it: most never do)."""
    return spellings(
        AddNode, CalculateDeploy, CalculateRealloc, DeployCapacity, SetUsage, SetNodeInfo,
        EngineInfo, Metrics, WorkloadRequestWire, WorkloadResource, Disk, NodeResource,
        RequestForm,
    )  # fmt: skip


OPAQUE = frozenset({"volumes", "volume_plan_request", "volume_plan_limit", "Resources"})
"""Fields whose values' keys are data (paths, bindings, plugin names), never fields."""

decode = CaseStrict(fields, OPAQUE, lambda raw: not exactly_spelled(raw))
"""Reads a storage request."""
