"""Where things live in etcd (P = ``etcd.prefix``).

* ``P/resource/gpu/<node>``: the head, in the upstream plugin's JSON shape plus ``seq``.
* ``P/resource/gpu/<node>/events/<seq>``: one key per event, ``seq`` zero-padded so a prefix
  range returns the stream in order.
"""

from __future__ import annotations

import msgspec

from resource_extend.ledger.errors import InvalidRequest

SEQ_WIDTH = 12


def range_end(prefix: bytes) -> bytes:
    """The exclusive end of the range of keys that start with ``prefix`` (etcd's prefix end)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\x00"
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


class KeyLayout(msgspec.Struct, frozen=True):
    prefix: str = "/eru"

    @property
    def root(self) -> bytes:
        return f"{self.prefix.rstrip('/')}/resource/gpu/".encode()

    def head(self, node: str) -> bytes:
        return self.root + node.encode()

    def events(self, node: str) -> bytes:
        """The prefix of the node's event keys."""
        return self.head(node) + b"/events/"

    def event(self, node: str, seq: int) -> bytes:
        return self.events(node) + str(seq).zfill(SEQ_WIDTH).encode()

    def seq_of(self, node: str, key: bytes) -> int:
        return int(key[len(self.events(node)) :])


MAX_NODE_NAME = 253


def check_node_name(name: str | None) -> str:
    """A node name usable as one key segment, or InvalidRequest."""
    if name is None or not name.strip():
        raise InvalidRequest("node name is empty")
    if "/" in name:
        raise InvalidRequest(f"node name {name!r} contains '/'", node=name)
    if len(name) > MAX_NODE_NAME:
        raise InvalidRequest(f"node name is longer than {MAX_NODE_NAME} characters")
    if not name.isprintable():
        raise InvalidRequest(f"node name {name!r} contains control characters")
    return name
