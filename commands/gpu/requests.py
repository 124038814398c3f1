"""The request of every core verb, with core's field names. Unknown keys are ignored and
``null`` stands for an absent value everywhere, with one exception: a key that spells a field
of ``R`` in another case (``Prod_Count_Map``) is refused (:func:`decode`)."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec

from resource_extend.commands import requests as shared
from resource_extend.commands.requests import (
    MAX_WORKLOADS,
    DeployCount,
    EngineInfo,
    Metrics,
    MetricsNode,
    NodeRequest,
    NodesRequest,
)

__all__ = [  # the shared shapes too: a verb finds every request of its kind here
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
    "ResourceRequest",
    "SetCapacity",
    "SetNodeInfo",
    "SetUsage",
    "decode",
    "miscased",
]
from resource_extend.projections.gpu.resources import Count, Product, Resource

T = TypeVar("T")
FIELD = "prod_count_map"
"""The one field of ``R``."""
_FIELDS = {FIELD: FIELD}
_FIELDS_OPAQUE = frozenset(_FIELDS)
"""The field whose mis-casing :func:`decode` refuses, and whose values (product maps) it does
not look into: their keys are products."""

Workloads = Annotated[list[Resource | None], msgspec.Meta(max_length=MAX_WORKLOADS)]


class CalculateDeploy(NodeRequest, kw_only=True):
    deploy_count: DeployCount = 0
    workload_resource_request: Resource | None = None


class CalculateRealloc(NodeRequest, kw_only=True):
    workload_resource: Resource | None = None
    workload_resource_request: Resource | None = None


class AddNode(NodeRequest, kw_only=True):
    resource: Resource | None = None
    info: EngineInfo | None = None


class DeployCapacity(NodesRequest, kw_only=True):
    workload_resource: Resource | None = None


class ResourceRequest(msgspec.Struct):
    """``resource_request`` of the set verbs: ``R``, where ``{}`` (no ``prod_count_map`` at all)
    asks set-node-resource-capacity to keep the capacity on a replace, as upstream does."""

    prod_count_map: dict[Product, Count] | msgspec.UnsetType | None = msgspec.UNSET

    @property
    def names_cards(self) -> bool:
        return self.prod_count_map is not msgspec.UNSET

    def as_resource(self) -> Resource:
        cards = self.prod_count_map
        return Resource(prod_count_map=None if cards is msgspec.UNSET else cards)


class SetCapacity(NodeRequest, kw_only=True):
    resource: Resource | None = None
    resource_request: ResourceRequest | None = None
    delta: bool | None = False
    incr: bool | None = False


class SetUsage(SetCapacity, kw_only=True):
    workloads_resource: Workloads | None = None


class NodeResourceInfo(NodeRequest, kw_only=True):
    workloads_resource: Workloads | None = None


class SetNodeInfo(NodeRequest, kw_only=True):
    capacity: Resource | None = None
    usage: Resource | None = None


def decode(raw: bytes, request_type: type[T]) -> T:
    """``raw`` as ``request_type``; raises msgspec's errors, and ``ValidationError`` for a key
    that spells ``prod_count_map`` in another case anywhere (see :func:`miscased`)."""
    decoded = msgspec.json.decode(raw, type=request_type)
    if _may_spell_field_otherwise(raw):
        shared.refuse_miscased(raw, _FIELDS, _FIELDS_OPAQUE)
    return decoded


def _may_spell_field_otherwise(raw: bytes) -> bool:
    """A quick look at the bytes: only these requests need :func:`miscased`'s full walk."""
    return raw.lower().count(FIELD.encode()) != raw.count(FIELD.encode()) or b"\\u" in raw


def miscased(request: Any) -> tuple[str, str] | None:
    """Where (path, key) a decoded request spells ``prod_count_map`` in another case, if
    anywhere (:func:`commands.requests.miscased`); product maps are not looked into: their
    keys are products."""
    found = shared.miscased(request, _FIELDS, _FIELDS_OPAQUE)
    return None if found is None else found[:2]
