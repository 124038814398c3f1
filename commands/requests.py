"""The request shapes every kind's verbs share, with core's field names. Unknown keys are
ignored and ``null`` stands for an absent value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

MAX_NODES = 100_000
"""The most nodes one request may name (core asks per pod)."""
MAX_WORKLOADS = 1_000_000
"""The most workloads one request may carry (a node's whole usage, for a rebuild)."""

Nodenames = Annotated[list[str], msgspec.Meta(max_length=MAX_NODES)]
DeployCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_NODES)]
"""How many workloads one calculate-deploy places on one node."""


class NodeRequest(msgspec.Struct, kw_only=True):
    nodename: str | None = None


class NodesRequest(msgspec.Struct, kw_only=True):
    nodenames: Nodenames | None = None


class EngineInfo(msgspec.Struct, kw_only=True):
    """The part of core's engine info the plugins read: ``Resources``, base64 JSON per plugin."""

    resources: dict[str, bytes] | None = msgspec.field(default=None, name="Resources")


class MetricsNode(msgspec.Struct, kw_only=True):
    podname: str | None = None
    nodename: str | None = None


class Metrics(MetricsNode, kw_only=True):
    nodes: Annotated[list[MetricsNode], msgspec.Meta(max_length=MAX_NODES)] | None = None


def spellings(*types: type[msgspec.Struct]) -> dict[str, str]:
    """Every field of ``types`` as JSON names it, by its case-folded form."""
    return {
        field.encode_name.casefold(): field.encode_name
        for struct in types
        for field in msgspec.structs.fields(struct)
    }


def miscased(
    request: Any, fields: Mapping[str, str], opaque: frozenset[str] = frozenset()
) -> tuple[str, str, str] | None:
    """Where (path, key, the field's spelling) a decoded request spells a field in another
    case, if anywhere. Go's decoder matched such a key to the field; read here as an unknown
    key, it would be ignored, and a verb would count nothing where core meant something. The
    values of ``opaque`` fields are not looked into: their keys are data (products, paths)."""
    stack: list[tuple[str, Any]] = [("$", request)]
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
