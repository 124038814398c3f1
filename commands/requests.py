"""The request shapes every kind's verbs share, with core's field names. Unknown keys are
ignored and ``null`` stands for an absent value."""

from __future__ import annotations

from typing import Annotated

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
