"""The request of every core verb, written once for every kind with core's field names, generic
over what only a kind knows: how it writes a node's resource, a workload's resource and a
workload's request. A kind binds them (``commands.gpu.requests``: ``AddNode[Resource]``), as
the answers are bound (``projections.answers``). Unknown keys are ignored and ``null`` stands
for an absent value; a key that spells a field in another case is refused
(:class:`CaseStrict`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Generic, TypeVar

import msgspec

MAX_NODES = 100_000
"""The most nodes one request may name (core asks per pod)."""
MAX_WORKLOADS = 1_000_000
"""The most workloads one request may carry (a node's whole usage, for a rebuild)."""

Nodenames = Annotated[list[str], msgspec.Meta(max_length=MAX_NODES)]
DeployCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_NODES)]
"""How many workloads one calculate-deploy places on one node."""


N = TypeVar("N")
"""A node's resource, as a request carries it (GPU: ``Resource``)."""
A = TypeVar("A")
"""What the set verbs' ``resource_request`` carries (GPU: ``ResourceRequest``)."""
W = TypeVar("W")
"""A workload's resource (what calculate-deploy answered for it)."""
Q = TypeVar("Q")
"""A workload's request (what core asks calculate-deploy to place)."""
T = TypeVar("T")


class NodeRequest(msgspec.Struct, kw_only=True):
    """A request about one node (``remove-node``'s whole request)."""

    nodename: str | None = None


class NodesRequest(msgspec.Struct, kw_only=True):
    """A request about many nodes (``get-nodes-resource-info``'s whole request)."""

    nodenames: Nodenames | None = None


StorageTotal = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
"""Bytes, as Go's int64: never negative."""


class EngineInfo(msgspec.Struct, kw_only=True):
    """The part of core's engine info the plugins read: ``Resources``, base64 JSON per plugin,
    and the engine's ``StorageTotal`` (resource-storage's share when add-node names none)."""

    resources: dict[str, bytes] | None = msgspec.field(default=None, name="Resources")
    storage_total: StorageTotal = msgspec.field(default=0, name="StorageTotal")


class MetricsNode(msgspec.Struct, kw_only=True):
    podname: str | None = None
    nodename: str | None = None


class Metrics(MetricsNode, kw_only=True):
    nodes: Annotated[list[MetricsNode], msgspec.Meta(max_length=MAX_NODES)] | None = None


class AddNode(NodeRequest, Generic[N], kw_only=True):
    resource: N | None = None
    info: EngineInfo | None = None


class CalculateDeploy(NodeRequest, Generic[Q], kw_only=True):
    deploy_count: DeployCount = 0
    workload_resource_request: Q | None = None


class CalculateRealloc(NodeRequest, Generic[W, Q], kw_only=True):
    workload_resource: W | None = None
    workload_resource_request: Q | None = None


class DeployCapacity(NodesRequest, Generic[Q], kw_only=True):
    workload_resource: Q | None = None
    """The request, despite its name (core's field)."""


class SetCapacity(NodeRequest, Generic[N, A], kw_only=True):
    resource: N | None = None
    resource_request: A | None = None
    delta: bool | None = False
    incr: bool | None = False


class SetUsage(SetCapacity[N, A], Generic[N, A, W], kw_only=True):
    workloads_resource: Annotated[list[W | None], msgspec.Meta(max_length=MAX_WORKLOADS)] | None = (
        None
    )


class NodeWorkloads(NodeRequest, Generic[W], kw_only=True):
    """A node and the workloads core knows on it (get-node-resource-info, fix-node-resource)."""

    workloads_resource: Annotated[list[W | None], msgspec.Meta(max_length=MAX_WORKLOADS)] | None = (
        None
    )


class SetNodeInfo(NodeRequest, Generic[N], kw_only=True):
    capacity: N | None = None
    usage: N | None = None


class CaseStrict:
    """A kind's request decoder (``protocol.Decode``): msgspec's, and then a refusal of any key
    that spells one of the kind's fields in another case (:func:`refuse_miscased`)."""

    __slots__ = ("_fields", "opaque", "suspect")

    def __init__(
        self,
        fields: Callable[[], Mapping[str, str]],
        opaque: frozenset[str],
        suspect: Callable[[bytes], bool],
    ) -> None:
        self._fields = fields
        """Every field a request may hold, by its case-folded form (made on first need)."""
        self.opaque = opaque
        """Fields whose values' keys are data (products, paths), never fields."""
        self.suspect = suspect
        """A quick look at the bytes: false when no key can be mis-cased (most requests)."""

    def fields(self) -> Mapping[str, str]:
        return self._fields()

    def __call__(self, raw: bytes, request_type: type[T]) -> T:
        """``raw`` as ``request_type``; raises msgspec's errors, and ``ValidationError`` for a
        key spelling a field in another case anywhere."""
        decoded = msgspec.json.decode(raw, type=request_type)
        if self.suspect(raw):
            refuse_miscased(raw, self.fields(), self.opaque)
        return decoded

    def miscased(self, request: object) -> tuple[str, str] | None:
        """Where (path, key) a decoded request spells a field in another case, if anywhere."""
        found = miscased(request, self.fields(), self.opaque)
        return None if found is None else found[:2]


def spellings(*types: type[msgspec.Struct]) -> dict[str, str]:
    """Every field of ``types`` as JSON names it, by its case-folded form."""
    return {
        field.encode_name.casefold(): field.encode_name
        for struct in types
        for field in msgspec.structs.fields(struct)
    }


def miscased(
    request: object, fields: Mapping[str, str], opaque: frozenset[str] = frozenset()
) -> tuple[str, str, str] | None:
    """Where (path, key, the field's spelling) a decoded request spells a field in another
    case, if anywhere. Go's decoder matched such a key to the field; read here as an unknown
    key, it would be ignored, and a verb would count nothing where core meant something. The
    values of ``opaque`` fields are not looked into: their keys are data (products, paths)."""
    stack: list[tuple[str, object]] = [("$", request)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                exact = fields.get(key.casefold())
                if exact is not None and key != exact:
                    return path, key, exact
                if key not in opaque:
                    stack.append((f"{path}.{key}" if key.isidentifier() else f"{path}[...]", item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return None


def refuse_miscased(raw: bytes, fields: Mapping[str, str], opaque: frozenset[str]) -> None:
    """Raises ``ValidationError`` (path, key and the field's spelling) when the request in
    ``raw`` spells a field in another case anywhere (see :func:`miscased`)."""
    where = miscased(msgspec.json.decode(raw), fields, opaque)
    if where is not None:
        path, key, exact = where
        raise msgspec.ValidationError(
            f"{key!r} is not a field: it is spelled {exact!r} - at `{path}`"
        )
