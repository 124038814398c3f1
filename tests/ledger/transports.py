"""What the tests of both etcd transports share: which transport a test takes, a record of the
calls made to a function while the function still runs, and one call's read and write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.host.config import EtcdConfig

Over = Literal["http", "grpc"]
"""The transport a test's calls take (``etcd.transport``)."""


Recorded = list[tuple[Any, ...]]
"""The arguments of each call recorded (``Calls.made``)."""


class Calls:
    """The calls made to ``owner.name`` from now on, each its arguments (those ``when`` takes,
    if given); the function itself still runs."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        owner: object,
        name: str,
        when: Callable[..., bool] | None = None,
    ) -> None:
        self.made: Recorded = []
        original = getattr(owner, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            if when is None or when(*args, **kwargs):
                self.made.append(args)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)


def version(config: EtcdConfig, key: bytes = b"/x") -> int:
    """One call's read of ``key`` over a transport of its own, closed after: its version
    (how often it was written; 0: no such key)."""
    transport = open_transport(config)
    try:
        reply = transport.send(0, wire.RangeRequest(key=key), wire.RangeResponse, 5)
        return reply.kvs[0].version if reply.kvs else 0
    finally:
        transport.close()


def put(config: EtcdConfig, key: bytes) -> None:
    """One call's write of ``key``, over a transport of its own, closed after."""
    transport = open_transport(config)
    try:
        txn = wire.TxnRequest(success=[wire.put(key, b"v")])
        assert transport.send(0, txn, wire.TxnResponse, 5).succeeded
    finally:
        transport.close()
