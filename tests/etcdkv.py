"""Direct access to the test etcd, independent of the product's store: raw keys with their
revisions, the cluster revision, and heads written by hand (as the upstream Go plugin writes them).

The key layout is spelled out here from the spec rather than imported, so the tests check it.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# etcd3 0.12's generated protobuf modules only load with the pure-Python protobuf backend.
os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"

with warnings.catch_warnings():  # its old-style descriptors warn on import
    warnings.simplefilter("ignore", DeprecationWarning)
    import etcd3
    from etcd3 import etcdrpc

MAX_TXN_OPS = 128
SEQ_WIDTH = 12
RPC_TIMEOUT = 10.0


def prefix_end(prefix: bytes) -> bytes:
    """The exclusive end of the keys starting with ``prefix``."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


@dataclass(frozen=True)
class KV:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int

    def json(self) -> Any:
        return json.loads(self.value)


class Etcd:
    """The keys of one plugin installation (one prefix) on the test etcd."""

    def __init__(self, endpoints: list[str], prefix: str, kind: str = "gpu") -> None:
        url = urlsplit(endpoints[0])
        self.client = etcd3.client(host=url.hostname, port=url.port or 2379, timeout=RPC_TIMEOUT)
        self.root = f"{prefix.rstrip('/')}/resource/{kind}/"
        """The heads' prefix: nothing else lives under it."""
        self.events_root = f"{prefix.rstrip('/')}/resource-events/{kind}/"
        """The streams' prefix."""

    def close(self) -> None:
        self.client.close()

    # -- layout (from the spec) -----------------------------------------------------------------

    def head_key(self, node: str) -> str:
        return self.root + node

    def events_prefix(self, node: str) -> str:
        return f"{self.events_root}{node}/"

    def event_key(self, node: str, seq: int) -> str:
        return self.events_prefix(node) + str(seq).zfill(SEQ_WIDTH)

    def legacy_event_key(self, node: str, seq: int) -> str:
        """Where release 0.1 kept event ``seq``: under the head."""
        return f"{self.head_key(node)}/events/{str(seq).zfill(SEQ_WIDTH)}"

    def legacy_events(self, node: str, revision: int = 0) -> list[KV]:
        prefix = f"{self.head_key(node)}/events/".encode()
        return self._kvs(self._range(prefix, prefix_end(prefix), revision))

    # -- reads ----------------------------------------------------------------------------------

    def _range(self, key: bytes, end: bytes | None = None, revision: int = 0) -> Any:
        request = etcdrpc.RangeRequest(key=key, revision=revision)
        if end is not None:
            request.range_end = end
        return self.client.kvstub.Range(request, RPC_TIMEOUT, metadata=self.client.metadata)

    def _kvs(self, reply: Any) -> list[KV]:
        return [
            KV(kv.key.decode(), kv.value, kv.create_revision, kv.mod_revision) for kv in reply.kvs
        ]

    def revision(self) -> int:
        """The cluster's current revision (from a Range reply's header)."""
        return int(self._range(b"\0").header.revision)

    def head(self, node: str) -> KV | None:
        found = self._kvs(self._range(self.head_key(node).encode()))
        return found[0] if found else None

    def events(self, node: str, revision: int = 0) -> list[KV]:
        """The node's event keys (numbers: not the seq its last compaction recorded)."""
        prefix = self.events_prefix(node).encode()
        return self._kvs(self._range(prefix + b"0", prefix + b":", revision))

    def event_docs(self, node: str) -> list[dict[str, Any]]:
        return [kv.json() for kv in self.events(node)]

    def snapshot(self) -> dict[str, KV]:
        """Every key of the installation: heads and streams."""
        found = {}
        for root in (self.root.encode(), self.events_root.encode()):
            found.update({kv.key: kv for kv in self._kvs(self._range(root, prefix_end(root)))})
        return found

    # -- writes by hand -------------------------------------------------------------------------

    def put_many(self, items: Mapping[str, bytes]) -> None:
        """Put keys in transactions of at most etcd's 128 operations."""
        pairs = list(items.items())
        for start in range(0, len(pairs), MAX_TXN_OPS):
            ops = [
                self.client.transactions.put(k, v) for k, v in pairs[start : start + MAX_TXN_OPS]
            ]
            ok, _ = self.client.transaction(compare=[], success=ops, failure=[])
            assert ok

    def put_upstream_head(self, node: str, head: Mapping[str, Any]) -> None:
        self.put_many({self.head_key(node): json.dumps(head).encode()})


def upstream_head(capacity: dict[str, int], usage: dict[str, int] | None) -> dict[str, Any]:
    """A node record as the upstream Go plugin stores it: no ``seq``, no events."""
    return {"capacity": {"prod_count_map": capacity}, "usage": {"prod_count_map": usage}}


@contextmanager
def no_write(etcd: Etcd) -> Iterator[None]:
    """Assert the block changes nothing in etcd: the cluster revision does not move."""
    before = etcd.revision()
    keys = etcd.snapshot()
    yield
    assert etcd.revision() == before, "etcd was written to"
    assert etcd.snapshot() == keys
