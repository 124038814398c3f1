"""resource-gpu's requests: the shapes of ``commands.requests`` with a GPU map, ``R``
(``{"prod_count_map": {"<product>": <count>}}``), wherever a resource goes. A key that spells
``prod_count_map``, or a field of the engine's report, in another case (``Prod_Count_Map``,
``resources``) is refused (:data:`decode`)."""

from __future__ import annotations

import msgspec

from resource_extend.commands import requests as shapes
from resource_extend.commands.requests import CaseStrict
from resource_extend.projections.gpu.resources import Count, Product, Resource

FIELD = "prod_count_map"
"""The one field of ``R``."""


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


AddNode = shapes.AddNode[Resource]
CalculateDeploy = shapes.CalculateDeploy[Resource]
CalculateRealloc = shapes.CalculateRealloc[Resource, Resource]
DeployCapacity = shapes.DeployCapacity[Resource]
SetCapacity = shapes.SetCapacity[Resource, ResourceRequest]
SetUsage = shapes.SetUsage[Resource, ResourceRequest, Resource]
NodeWorkloads = shapes.NodeWorkloads[Resource]
SetNodeInfo = shapes.SetNodeInfo[Resource]


FIELDS = {FIELD: FIELD, **shapes.spellings(shapes.EngineInfo)}
"""The fields a key must not spell in another case, by their case-folded form: ``R``'s, and
the engine report's (``Resources``, ``StorageTotal``: Go's field names, as core sends them)."""


def _may_spell_field_otherwise(raw: bytes) -> bool:
    """Only these requests need the full walk: a field's letters in another case, or an
    escape that may hide them."""
    lowered = raw.lower()
    return b"\\u" in raw or any(
        lowered.count(folded.encode()) != raw.count(field.encode())
        for folded, field in FIELDS.items()
    )


decode = CaseStrict(lambda: FIELDS, frozenset({FIELD, "Resources"}), _may_spell_field_otherwise)
"""Reads a GPU request; product maps and the engine's ``Resources`` are not looked into: their
keys are products and plugin names."""
