"""The etcd store: what the plugin reads and writes in etcd, and how (``ledger.etcd.transport``
carries the requests).

A store is composed of parts that each own one job, as etcd's own client is; a query opens
only the reading ones (:class:`Reads`):

* ``etcd``: the connection (requests within the call's time budget, fail-over);
* ``scans``: reads across many nodes;
* ``streams``: a node's stream, read a page at a time;
* ``records``: a node's record, in one round trip;
* ``outcomes``: what became of a write;
* ``appender``: changes appended as events, with compare-and-swap (``ledger.store.appender``);
* ``checkpoints``: compaction's writes.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.etcd.transport import Transport
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.store.appender import Appender, WriteHook, who
from resource_extend.ledger.store.checkpoints import Checkpoints
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.ledger.store.outcomes import Outcomes
from resource_extend.ledger.store.records import NodeReads
from resource_extend.ledger.store.scans import Scans
from resource_extend.ledger.store.streams import StreamReads

S = TypeVar("S", bound=msgspec.Struct)
"""The node state of the store's resource kind."""


class Reads(Generic[S]):
    """One plugin call's read-only view of the store for one resource kind, bounded in time by
    ``config.timeout``: what a query needs (as etcd's client gives reads a KV, and writes a
    transaction), and nothing that writes."""

    def __init__(
        self,
        config: EtcdConfig,
        kind: Kind[S],
        transport: Transport | None = None,
        *,
        deadline: float | None = None,
        etcd: Connection | None = None,
    ) -> None:
        self.config = config
        self.kind = kind
        self.keys = KeyLayout(config.prefix, kind.name)
        self.etcd = etcd or Connection(config, transport, deadline=deadline)
        """The connection: this view's own, or (``etcd``) one a call already holds."""
        self.scans = Scans(self.etcd, self.keys)
        self.streams = StreamReads(self.etcd, self.keys, kind)
        self.records = NodeReads(self.etcd, self.keys, kind, self.scans, self.streams)

    def close(self) -> None:
        self.etcd.close()


class Store(Reads[S]):
    """One plugin call's store for one resource kind in etcd: its reads, and what writes
    (``outcomes``, ``appender``, ``checkpoints``)."""

    def __init__(
        self,
        config: EtcdConfig,
        kind: Kind[S],
        transport: Transport | None = None,
        *,
        deadline: float | None = None,
        etcd: Connection | None = None,
        write_hook: WriteHook | None = None,
        by: str | None = None,
    ) -> None:
        super().__init__(config, kind, transport, deadline=deadline, etcd=etcd)
        self.by = by or who()
        self.outcomes = Outcomes(self.etcd, self.keys, kind, self.streams, self.by)
        self.appender = Appender(
            config, kind, self.keys, self.etcd, self.records, self.outcomes,
            by=self.by, write_hook=write_hook,
        )  # fmt: skip
        self.checkpoints = Checkpoints(self.etcd, self.keys, self.outcomes, by=self.by)
