"""Writes that gave up, counted by verb in etcd, where an exporter on any host reads them.

A write that lands is an event, and the event says how many compare-and-swaps it lost first
(``Event.retries``); a write that gives up leaves no event. So each one that gives up puts
one key, ``P/resource-tallies/K/failed/<verb>``, holding the last such failure, and etcd counts
the puts: the key's ``version`` is the number of writes of that verb that failed since the key
was made. A blind put, so racing failures never conflict, and sent once: a put retried after
a lost answer would count one failure twice. Best effort, by nature: a write that failed
because etcd was unreachable cannot be counted there either.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.store.keys import range_end

GRACE = 0.5
"""Seconds a failed write may spend past its deadline to count itself."""


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """The last failure of one verb, as stored."""

    node: str
    at: datetime
    by: str
    reason: str


def root(prefix: str, kind: str) -> bytes:
    """The prefix of one kind's failure tallies."""
    return f"{prefix.rstrip('/')}/resource-tallies/{kind}/failed/".encode()


def record(prefix: str, kind: str, verb: str, failure: Failure) -> wire.TxnRequest:
    """The transaction that counts one failure of ``verb``."""
    key = root(prefix, kind) + verb.encode()
    return wire.TxnRequest(success=[wire.put(key, msgspec.json.encode(failure))])


def read(prefix: str, kind: str) -> wire.RangeRequest:
    """The range that reads every tally of the kind (a few keys: one per verb)."""
    start = root(prefix, kind)
    return wire.RangeRequest(key=start, range_end=range_end(start))


def counts(prefix: str, kind: str, kvs: list[wire.KeyValue]) -> dict[str, int]:
    """Failures by verb, from what :func:`read` found."""
    start = root(prefix, kind)
    return {kv.key[len(start) :].decode(errors="replace"): kv.version for kv in kvs}
