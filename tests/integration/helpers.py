"""Shorthands shared by the integration tests (the harness itself is ``tests/plugin.py``)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from tests.etcdkv import Etcd, upstream_head
from tests.plugin import Plugin, R, counts

P3070 = "nvidia-3070"
P3090 = "nvidia-3090"

Spec = dict[int, int]
"""A card map the way upstream's tests write it: ``{3070: 1}`` is ``{"nvidia-3070": 1}``."""


def G(spec: Spec | None) -> dict[str, int] | None:
    """``{3070: 1}`` -> ``{"nvidia-3070": 1}``; ``None`` stays ``None``."""
    return None if spec is None else {f"nvidia-{model}": count for model, count in spec.items()}


def RG(spec: Spec | None) -> dict[str, Any] | None:
    """Core's ``R`` shape of such a map."""
    return R(G(spec))


EIGHT: dict[str, int] = {P3070: 4, P3090: 4}
"""The upstream fixture node: ``{"nvidia-3070": 4, "nvidia-3090": 4}``, 8 cards."""

RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$")


def total(value: Any) -> int:
    """The card count of an ``R`` answer (the count upstream's tests check)."""
    return sum(counts(value).values())


def state(plugin: Plugin, node: str) -> tuple[dict[str, int], dict[str, int]]:
    """``(capacity, usage)`` of a node the plugin knows, read with get-node-resource-info."""
    info = plugin.info(node)
    assert info is not None, f"node {node} is unknown"
    return counts(info["capacity"]), counts(info["usage"])


def event_count(plugin: Plugin, node: str) -> int:
    return len(plugin.history(node))


def fails_on(plugin: Plugin, verb: str, request: Any, node: str, *reasons: str) -> str:
    """The verb fails with ``resource-gpu <verb>: node <node>: <reason>``; ``reasons`` are
    fragments the reason must contain (case-insensitive)."""
    line = plugin.fails(verb, request)
    prefix = f"resource-gpu {verb}: node {node}: "
    assert line.startswith(prefix), f"expected {prefix!r}..., got {line!r}"
    reason = line[len(prefix) :]
    assert reason.strip(), f"no reason given: {line!r}"
    for fragment in reasons:
        assert fragment.lower() in reason.lower(), f"{fragment!r} not in {line!r}"
    return line


def set_usage(plugin: Plugin, node: str, cards: dict[str, int] | None) -> Any:
    """Set a node's usage absolutely (core's partial-failure rollback form)."""
    request = {"nodename": node, "resource": R(cards), "delta": False, "incr": False}
    return plugin.ok("set-node-resource-usage", request)


def set_capacity(plugin: Plugin, node: str, cards: dict[str, int] | None) -> Any:
    request = {"nodename": node, "resource_request": R(cards), "delta": False, "incr": True}
    return plugin.ok("set-node-resource-capacity", request)


def engine_resource(value: Any) -> str:
    """How a VM engine reports a plugin's cards in ``info.Resources``: base64 of JSON."""
    return base64.b64encode(json.dumps(value).encode()).decode()


def put_upstream_records(
    plugin: Plugin, records: dict[str, tuple[dict[str, int], dict[str, int]]]
) -> None:
    """Node records as the upstream Go plugin writes them: at
    ``<prefix>/resource/gpu/<node>``, the JSON ``{"capacity": R, "usage": R}``, no stream."""
    etcd = Etcd(plugin.endpoints, plugin.prefix)
    try:
        etcd.put_many(
            {
                etcd.head_key(node): json.dumps(upstream_head(capacity, usage)).encode()
                for node, (capacity, usage) in records.items()
            }
        )
    finally:
        etcd.close()
