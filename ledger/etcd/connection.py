"""One plugin call's connection to etcd: requests within the call's time budget
(``etcd.timeout``), failover between endpoints, and parallel reads. It knows nothing of what
the keys mean (:mod:`ledger.store` does); ``ledger.etcd.transport`` carries the requests.

A write that may have reached etcd is never resent here: it raises :class:`Ambiguous`, and
the store decides, after looking for the write's operation id.

A request starts at the member the one before it was answered by, in this call or (the first
of a call) in this process, and tries last a member that failed to answer lately
(``ledger.etcd.health``): a member that hangs costs a process one request's share of the
time, not every call's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.choice import REINSTALL, choose
from resource_extend.ledger.etcd.health import HEALTH
from resource_extend.ledger.etcd.transport import (
    HttpTransport,
    NoSpace,
    NotEtcd,
    NotEtcdAnswer,
    Refused,
    Request,
    Transport,
    Unavailable,
)
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.errors import EtcdFull, StoreError


def open_transport(config: EtcdConfig, *, scan: bool = False) -> Transport:
    """The transport ``etcd.transport`` names for this process's requests, a scan over many
    nodes or the rest (:func:`choose`)."""
    if choose(config.transport, scan=scan).transport == "grpc":
        try:
            from resource_extend.ledger.etcd.grpc_transport import GrpcTransport
        except ImportError as exc:
            raise StoreError(
                f"etcd.transport: grpc needs the gRPC libraries ({exc.name} is missing): "
                f"{REINSTALL}, or use transport: auto"
            ) from None
        return GrpcTransport(config)
    return HttpTransport(config)


Reply = TypeVar(
    "Reply", wire.RangeResponse, wire.TxnResponse, wire.StatusResponse, wire.AlarmResponse
)
T = TypeVar("T")

MAX_TXN_OPS = 128
"""etcd's default ``--max-txn-ops``: no transaction here carries more operations."""

PASS_BACKOFF = (0.1, 0.3, None)
"""A read goes round all endpoints up to three times, pausing this long (s) between rounds."""

READERS = 4
"""Connections that read a many-node request's batches in parallel."""

CALL_LIMIT = 28.0
"""Seconds a core call may last, with a margin: core kills one at 30 s."""

SETTLE_SHARE = 0.2
"""Of ``etcd.timeout``: what an append keeps back when it sends a write, to settle the write by
its op id should the answer be lost; and the least it gives the write itself to be answered."""


class Ambiguous(Exception):
    """A write's request went out but no answer came back."""


class OutOfTime(StoreError):
    """The call's etcd time budget (``etcd.timeout``) is spent."""


class Connection:
    """Requests to etcd, bounded in time by ``config.timeout`` from the connection's start."""

    def __init__(
        self,
        config: EtcdConfig,
        transport: Transport | None = None,
        *,
        deadline: float | None = None,
        scan: bool = False,
    ) -> None:
        self._config = config
        self._endpoints = [(where.host, where.port) for where in config.endpoints]
        self._cluster = tuple(self._endpoints)
        self._transport = transport or open_transport(config, scan=scan)
        self._scans: Transport | None = self._transport if transport or scan else None
        """What a scan over many nodes goes over (:meth:`_scan_transport`); None: not opened."""
        self._current = HEALTH.order(self._cluster)[0]
        """The member the next request goes to first: where the last was answered."""
        self._started = time.monotonic()
        self._deadline = deadline or self._started + config.timeout
        self._per_request = False

    def extend_to_settle(self) -> bool:
        """A write's answer was lost, and etcd did not answer the reads that would settle it
        within ``etcd.timeout``: it may be up, only slow. Up to ``etcd.timeout`` more to ask
        again, within core's call limit; False when none is left."""
        more = min(self._config.timeout, self._started + CALL_LIMIT - time.monotonic())
        if more <= 0:
            return False
        self.extend(more)
        return True

    def extend(self, seconds: float) -> None:
        """At least ``seconds`` more of the time budget, from now (a failure still to count)."""
        self._deadline = max(self._deadline, time.monotonic() + seconds)

    def renew(self) -> None:
        """A new time budget, for a long job made of many calls' worth of requests."""
        self._deadline = time.monotonic() + self._config.timeout

    def budget_per_request(self) -> None:
        """From now on each request has ``etcd.timeout`` of its own, not the connection as a
        whole: for a long-running job (the archiver), not for a core call."""
        self._per_request = True

    def close(self) -> None:
        self._transport.close()
        if self._scans is not None and self._scans is not self._transport:
            self._scans.close()

    def _scan_transport(self) -> Transport:
        """The transport a scan over many nodes takes: over gRPC where ``etcd.transport: auto``
        keeps the rest on HTTP (opened on the first scan), else the connection's own."""
        if self._scans is None:
            setting = self._config.transport
            if choose(setting, scan=True).transport == choose(setting).transport:
                self._scans = self._transport
            else:
                self._scans = open_transport(self._config, scan=True)
        return self._scans

    # -- transport ----------------------------------------------------------------------------

    def _where(self) -> str:
        host, port = self._endpoints[self._current]
        return f"{host}:{port}"

    def time_left(self) -> float:
        """Seconds of the time budget left (0 when it is spent)."""
        return max(self._deadline - time.monotonic(), 0.0)

    def settle_reserve(self) -> float:
        """Seconds an append keeps back when it sends a write (``SETTLE_SHARE``)."""
        return self._config.timeout * SETTLE_SHARE

    def _attempt_timeout(self, keep: float = 0.0) -> float:
        remaining = self._deadline - time.monotonic()
        if keep and remaining < 2 * keep:
            raise OutOfTime(
                f"etcd.timeout ({self._config.timeout:g}s) ran out before the write could be "
                "sent with time left to hear its answer; nothing was written"
            )
        if remaining <= 0:
            raise OutOfTime(
                f"etcd did not answer within {self._config.timeout:g}s "
                f"(etcd.machines: {', '.join(self._config.machines)})"
            )
        # Leave time to fail over: one endpoint may use its share of the budget, not all of it.
        return max(min(remaining - keep, self._config.timeout / len(self._endpoints)), 0.05)

    def txn(
        self, request: wire.TxnRequest, *, write: bool = False, keep: float = 0.0
    ) -> wire.TxnResponse:
        """One transaction. ``keep``: seconds of the budget the write leaves unused, for
        whatever must follow its answer; it is not sent unless as long again is left for it
        (so a write is never sent with too little time to be answered, or to be settled)."""
        try:
            return self._send(request, wire.TxnResponse, write=write, keep=keep)
        except EtcdFull:
            if write or not _ranges_only(request):
                raise
            # etcd before 3.5.5 refuses even a read-only transaction under NOSPACE; ranges
            # still pass, so read them one by one at one revision (what the transaction saw).
            return self._ranges_at_one_revision(request)

    def _ranges_at_one_revision(self, request: wire.TxnRequest) -> wire.TxnResponse:
        responses: list[wire.ResponseOp] = []
        revision = 0
        for op in request.success:
            assert op.request_range is not None
            asked = op.request_range
            if revision and not asked.revision:
                asked = msgspec.structs.replace(asked, revision=revision)
            answer = self.read_range(asked)
            revision = revision or answer.header.revision
            responses.append(wire.ResponseOp(response_range=answer))
        header = wire.Header(revision=revision)
        return wire.TxnResponse(header=header, succeeded=True, responses=responses)

    def read_range(self, request: wire.RangeRequest) -> wire.RangeResponse:
        return self._send(request, wire.RangeResponse)

    def pages(
        self, start: bytes, end: bytes, *, limit: int, revision: int = 0
    ) -> Iterator[wire.KeyValue]:
        """Every key from ``start`` to ``end``, in plain ranges of ``limit`` keys, all read at
        ``revision`` (0: the first page's)."""
        while True:
            asked = wire.RangeRequest(key=start, range_end=end, limit=limit, revision=revision)
            page = self._send(asked, wire.RangeResponse, scan=True)
            yield from page.kvs
            if not page.more:
                return
            # (a reply's header has etcd's current revision, not the one read at)
            start, revision = page.kvs[-1].key + b"\x00", revision or page.header.revision

    def status(self) -> tuple[str, wire.StatusResponse]:
        """The answering member (host:port) and its version and database size."""
        answer = self._send(wire.StatusRequest(), wire.StatusResponse)
        return self._where(), answer

    def alarms(self) -> list[str]:
        """The cluster's raised alarms (``NOSPACE``, ``CORRUPT``), each once."""
        answer = self._send(wire.AlarmRequest(), wire.AlarmResponse)
        return sorted({member.alarm for member in answer.alarms})

    def _send(
        self,
        request: Request,
        reply: type[Reply],
        *,
        write: bool = False,
        keep: float = 0.0,
        scan: bool = False,
    ) -> Reply:
        """Send one KV request (over the scans' transport if ``scan``), failing over between
        endpoints when one does not answer, and going round them again (a few times, within
        ``etcd.timeout``) while none does.

        A write that may have reached etcd is never resent here: it raises ``Ambiguous`` and
        :meth:`append` decides (after looking for its operation id).
        """
        failures: list[str] = []
        transport = self._scan_transport() if scan else self._transport
        if self._per_request:
            self.renew()
        for backoff in PASS_BACKOFF:
            failures.clear()
            for index in self._turn():
                self._current = index
                where = self._where()
                try:
                    timeout = self._attempt_timeout(keep)
                    answer = transport.send(index, request, reply, timeout)
                except NoSpace:
                    raise EtcdFull(where) from None
                except NotEtcd as exc:
                    if write and isinstance(exc, NotEtcdAnswer):  # it went out: etcd may have it
                        raise Ambiguous(f"{where}: {exc}") from None
                    raise StoreError(f"{where}: {exc}") from None
                except Refused as exc:
                    raise StoreError(f"etcd at {where} refused the request: {exc}") from None
                except Unavailable as exc:
                    failures.append(f"{where}: {exc}")
                    HEALTH.failed(self._cluster, index)
                    if write:  # what settles it starts elsewhere
                        self._current = HEALTH.order(self._cluster)[0]
                        raise Ambiguous("; ".join(failures)) from None
                    continue
                HEALTH.answered(self._cluster, index)
                return answer
            if backoff is None or self._deadline - time.monotonic() < backoff:
                break
            time.sleep(backoff)  # an election, a restart: give the cluster a moment
        raise StoreError(f"etcd unreachable ({'; '.join(failures)})")

    def _turn(self) -> list[int]:
        """The members a request tries, in turn: first the one the last request was answered
        by, then the rest as ``HEALTH`` orders them (one that failed lately, last)."""
        order = HEALTH.order(self._cluster)
        if HEALTH.avoided(self._cluster, self._current):
            return order
        return [self._current, *(index for index in order if index != self._current)]

    # -- reads --------------------------------------------------------------------------------

    def read_all(self, requests: list[wire.TxnRequest]) -> list[wire.TxnResponse]:
        """Read-only transactions, several in flight at once over their own connections (etcd
        serves them in parallel); in order."""
        if len(requests) < 2 * READERS:
            return [self.txn(request) for request in requests]

        def ask(request: wire.TxnRequest) -> Callable[[Connection], wire.TxnResponse]:
            return lambda reader: reader.txn(request)

        return self.in_parallel([ask(request) for request in requests])

    def in_parallel(self, reads: list[Callable[[Connection], T]]) -> list[T]:
        """Run each read on one of ``READERS`` connections of their own, within this one's time
        budget; their results, in order. Reads only: a failure is re-raised here."""
        import threading

        results: list[tuple[T] | None] = [None] * len(reads)
        failures: list[BaseException] = []

        def read_share(first: int) -> None:
            reader = Connection(self._config, deadline=self._deadline, scan=True)
            reader._current = self._current
            try:
                for i in range(first, len(reads), READERS):
                    results[i] = (reads[i](reader),)
            except BaseException as exc:  # re-raised in the calling thread
                failures.append(exc)
            finally:
                reader.close()

        shares = min(READERS, len(reads))
        threads = [threading.Thread(target=read_share, args=(i,)) for i in range(shares)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise failures[0]
        return [result[0] for result in results if result is not None]


def _ranges_only(request: wire.TxnRequest) -> bool:
    """Whether the transaction only reads: no compare, and ranges in its success branch."""
    return not request.compare and all(op.request_range is not None for op in request.success)
