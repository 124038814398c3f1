"""What a node may be called: one etcd key segment a person can read. Pure, so that the key
layout, every verb and a failure's one line (which abbreviates a longer name) share it."""

from __future__ import annotations

from resource_extend.ledger.model.errors import InvalidRequest

MAX_NODE_NAME = 253
"""As long as a DNS name may be."""


def check_node_name(name: str | None) -> str:
    """A node name usable as one key segment, or InvalidRequest. Length is checked before
    anything that quotes the name, so that no reason holds a name longer than this."""
    if name is None or not name.strip():
        raise InvalidRequest("node name is empty")
    if len(name) > MAX_NODE_NAME:
        raise InvalidRequest(f"node name is longer than {MAX_NODE_NAME} characters")
    if "/" in name:
        raise InvalidRequest(f"node name {name!r} contains '/'", node=name)
    if not name.isprintable():
        raise InvalidRequest(f"node name {name!r} contains control characters")
    return name
