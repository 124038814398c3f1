"""An in-memory etcd behind the ``Transport`` protocol (``ledger.etcd.transport``), for unit tests.

It keeps etcd's MVCC model, as far as the store relies on it: one global revision, incremented
once per transaction that writes; per key its create and mod revisions and version; every
version of every key, so that a range at ``revision=N`` reads as of N. Ranges (one key,
``[key, range_end)``, or every key from ``key`` when ``range_end`` is ``b"\\x00"``) honour
``limit`` (with ``more``; ``count`` ignores the limit), ``keys_only``, ``count_only`` and
sorting by key. Transactions evaluate their compares, then run the success or failure ops.

Faults a test can arm:

* :meth:`fail_next`: the next request to endpoint ``i`` raises ``Unavailable`` and never
  reaches etcd (``down`` holds endpoints that never answer);
* :meth:`lose_next_answer`: the next write is applied, then its answer is lost;
* :meth:`before_next_write` / :meth:`before_request`: a callback runs just before the next
  write (after ``skip`` requests); what it sends meets no fault and no hook;
* :attr:`write_latency`: every write is applied at once and answered this many seconds later,
  as by a loaded etcd; an answer later than the request's timeout is lost (``Unavailable``);
* :attr:`silent`: endpoints that take a request and never answer (``Unavailable`` once its
  timeout is spent).

etcd's refusals the store can meet are etcd's: a future revision, a transaction of more than
``MAX_TXN_OPS`` operations in a branch, a key put twice in one. With ``users``, auth is on:
:meth:`as_user` is a transport with a user's credentials, and a request without them is
refused, as one outside the user's granted prefix is. ``tests/etcd_contract.py`` holds the fake
to what real etcd does, through the same tests the real transports pass
(``tests/unit/test_memory_etcd.py``).
"""

from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import msgspec

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.transport import Refused, Reply, Request, Unavailable

Hook = Callable[[], object]
T = TypeVar("T", int, bytes)

MAX_TXN_OPS = 128
"""etcd's default ``--max-txn-ops``."""
Grants = dict[str, tuple[str, bytes]]
"""Users, each with its password and the key prefix it may read and write."""


@dataclass(frozen=True)
class _Version:
    """One write of a key (``value`` None: deleted)."""

    mod: int
    create: int
    version: int
    value: bytes | None


def _holds(result: Literal["EQUAL", "GREATER", "LESS", "NOT_EQUAL"], actual: T, wanted: T) -> bool:
    if result == "EQUAL":
        return actual == wanted
    if result == "NOT_EQUAL":
        return actual != wanted
    return actual > wanted if result == "GREATER" else actual < wanted


def _writes(request: wire.TxnRequest) -> bool:
    return any(op.request_range is None for op in (*request.success, *request.failure))


class MemoryEtcd:
    def __init__(self, endpoints: int = 1, *, users: Grants | None = None) -> None:
        self.endpoints = endpoints
        self.users = users
        self.revision = 1  # an empty etcd is at revision 1
        self.history: dict[bytes, list[_Version]] = {}
        self._sorted: list[bytes] = []  # every key ever written, in order
        self.served: Counter[int] = Counter()  # requests answered, by endpoint
        self.down: set[int] = set()
        self.silent: set[int] = set()
        self._unreachable: list[tuple[int, bool]] = []
        self._lost: list[Hook | None] = []
        self._before_write: list[Hook] = []
        self._before_request: list[tuple[int, Hook]] = []
        self._in_hook = False
        self.write_latency = 0.0

    # -- faults -------------------------------------------------------------------------------

    def fail_next(self, endpoint: int, *, writes_only: bool = False) -> None:
        """The next request (write: with ``writes_only``) to ``endpoint`` never reaches etcd."""
        self._unreachable.append((endpoint, writes_only))

    def lose_next_answer(self, then: Hook | None = None) -> None:
        """Apply the next write, run ``then``, and raise ``Unavailable`` for the answer."""
        self._lost.append(then)

    def before_next_write(self, hook: Hook) -> None:
        """Run ``hook`` just before the next write is applied (another writer, a compaction)."""
        self._before_write.append(hook)

    def before_request(self, hook: Hook, *, skip: int = 0) -> None:
        """Run ``hook`` before the request after the next ``skip`` requests that reach etcd."""
        self._before_request.append((skip, hook))

    def _run(self, hook: Hook) -> None:
        self._in_hook = True
        try:
            hook()
        finally:
            self._in_hook = False

    # -- the Transport protocol ---------------------------------------------------------------

    def send(
        self,
        endpoint: int,
        request: Request,
        reply: type[Reply],
        timeout: float,
    ) -> Reply:
        return self.serve(endpoint, request, reply, timeout, user=None)

    def as_user(self, name: str, password: str) -> _Session:
        """A transport that sends ``name``'s credentials with each request."""
        return _Session(self, name, password)

    def serve(
        self,
        endpoint: int,
        request: Request,
        reply: type[Reply],
        timeout: float,
        *,
        user: tuple[str, str] | None,
    ) -> Reply:
        assert 0 <= endpoint < self.endpoints, endpoint
        writes = isinstance(request, wire.TxnRequest) and _writes(request)
        lost: Hook | None = None
        answer_lost = False
        if endpoint in self.silent:
            time.sleep(timeout)
            raise Unavailable("deadline_exceeded: no answer in time (MemoryEtcd)")
        if not self._in_hook:
            self._reach(endpoint, writes)
            pending, self._before_request = self._before_request, []
            for skip, hook in pending:
                if skip:
                    self._before_request.append((skip - 1, hook))
                else:
                    self._run(hook)
            if writes and self._before_write:
                self._run(self._before_write.pop(0))
            if writes and self._lost:
                lost, answer_lost = self._lost.pop(0), True
        self._authorize(request, user)
        if isinstance(request, wire.RangeRequest):
            answer: wire.RangeResponse | wire.TxnResponse = self._range(request)
        elif isinstance(request, wire.TxnRequest):
            answer = self._txn(request)
        else:
            raise NotImplementedError(f"MemoryEtcd serves KV requests, not {request!r}")
        self.served[endpoint] += 1
        if writes and self.write_latency and not self._in_hook:
            time.sleep(min(self.write_latency, timeout))
            if self.write_latency > timeout:
                raise Unavailable("deadline_exceeded: the answer came too late (MemoryEtcd)")
        if answer_lost:
            if lost is not None:
                self._run(lost)
            raise Unavailable("unavailable: the answer was lost (MemoryEtcd)")
        # A round trip through JSON, as over etcd's gateway: the reply is what the store decodes.
        return msgspec.json.decode(msgspec.json.encode(answer), type=reply)

    def _reach(self, endpoint: int, writes: bool) -> None:
        if endpoint in self.down:
            raise Unavailable(f"unavailable: endpoint {endpoint} is down (MemoryEtcd)")
        for i, (where, writes_only) in enumerate(self._unreachable):
            if where == endpoint and (writes or not writes_only):
                del self._unreachable[i]
                raise Unavailable(f"unavailable: endpoint {endpoint} did not answer (MemoryEtcd)")

    def _authorize(self, request: Request, user: tuple[str, str] | None) -> None:
        """Refuses, as etcd with auth on does, a request without credentials, with a wrong
        password, or naming a key outside the user's grant."""
        if self.users is None:
            return
        if user is None or not user[0]:
            raise Refused("invalid_argument: etcdserver: user name is empty")
        name, password = user
        if self.users.get(name, ("", b""))[0] != password or not password:
            raise Refused(
                "invalid_argument: etcdserver: authentication failed, invalid user ID or password"
            )
        granted = self.users[name][1]
        if not all(key.startswith(granted) for key in _keys_named(request)):
            raise Refused("permission_denied: etcdserver: permission denied")

    def drop(self, endpoint: int) -> None:
        """Nothing to forget: there are no connections."""

    def close(self) -> None:
        """Nothing to close."""

    # -- the KV model -------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> int:
        """Write one key outside any request (to seed a test); the new revision."""
        self.revision += 1
        self._put(key, value, self.revision)
        return self.revision

    def get(self, key: bytes) -> bytes | None:
        """A key's value now (to check a test's outcome), None if it has none."""
        found = self._latest(key)
        return None if found is None else found.value

    def _latest(self, key: bytes, at: int = 0) -> _Version | None:
        """The key as of revision ``at`` (0: now, this transaction's writes included)."""
        versions = [v for v in self.history.get(key, []) if not at or v.mod <= at]
        return versions[-1] if versions and versions[-1].value is not None else None

    def _put(self, key: bytes, value: bytes, revision: int) -> None:
        if key not in self.history:
            bisect.insort(self._sorted, key)
        before = self._latest(key)
        create, version = (before.create, before.version) if before else (revision, 0)
        self.history.setdefault(key, []).append(_Version(revision, create, version + 1, value))

    def _keys(self, key: bytes, end: bytes, at: int = 0) -> list[tuple[bytes, _Version]]:
        if not end:
            found = self._latest(key, at)
            return [(key, found)] if found else []
        first = bisect.bisect_left(self._sorted, key)
        last = len(self._sorted) if end == b"\x00" else bisect.bisect_left(self._sorted, end)
        pairs = [(k, self._latest(k, at)) for k in self._sorted[first:last]]
        return [(k, v) for k, v in pairs if v is not None]

    def _range(self, request: wire.RangeRequest) -> wire.RangeResponse:
        if request.revision > self.revision:
            raise Refused("out_of_range: etcdserver: mvcc: required revision is a future revision")
        assert request.sort_target == "KEY", "MemoryEtcd sorts by key only"
        found = self._keys(request.key, request.range_end, request.revision)
        if request.sort_order == "DESCEND":
            found.reverse()
        shown = found[: request.limit] if request.limit else found
        kvs = [
            wire.KeyValue(
                key=k,
                value=b"" if request.keys_only else v.value or b"",
                mod_revision=v.mod,
                version=v.version,
            )
            for k, v in shown
        ]
        return wire.RangeResponse(
            header=wire.Header(revision=self.revision),
            kvs=[] if request.count_only else kvs,
            more=not request.count_only and len(shown) < len(found),
            count=len(found),
        )

    def _compare(self, compare: wire.Compare) -> bool:
        found = self._latest(compare.key)
        if compare.target == "VALUE":  # a missing key fails every value compare
            wanted: bytes = getattr(compare, "value", b"")
            return found is not None and _holds(compare.result, found.value or b"", wanted)
        i = ("VERSION", "MOD", "CREATE").index(compare.target)
        actual = (found.version, found.mod, found.create) if found else (0, 0, 0)
        wanted_int = (compare.version, compare.mod_revision, getattr(compare, "create_revision", 0))
        return _holds(compare.result, actual[i], int(wanted_int[i]))

    def _txn(self, request: wire.TxnRequest) -> wire.TxnResponse:
        for branch in (request.compare, request.success, request.failure):
            if len(branch) > MAX_TXN_OPS:
                raise Refused("invalid_argument: etcdserver: too many operations in txn request")
        for ops in (request.success, request.failure):
            put = [op.request_put.key for op in ops if op.request_put is not None]
            if len(put) != len(set(put)):
                raise Refused("invalid_argument: etcdserver: duplicate key given in txn request")
        succeeded = all(self._compare(compare) for compare in request.compare)
        revision, wrote = self.revision + 1, False
        responses: list[wire.ResponseOp] = []
        for op in request.success if succeeded else request.failure:
            if op.request_range is not None:
                responses.append(wire.ResponseOp(response_range=self._range(op.request_range)))
                continue
            if op.request_put is not None:
                self._put(op.request_put.key, op.request_put.value, revision)
                wrote = True
            elif op.request_delete_range is not None:
                gone = op.request_delete_range
                for key, _ in self._keys(gone.key, gone.range_end):
                    self.history[key].append(_Version(revision, 0, 0, None))
                    wrote = True
            responses.append(wire.ResponseOp())
        if wrote:
            self.revision = revision
        return wire.TxnResponse(
            header=wire.Header(revision=self.revision), succeeded=succeeded, responses=responses
        )


def _keys_named(request: Request) -> list[bytes]:
    """Every key and range end a request names (compares and both branches of a transaction)."""
    if isinstance(request, wire.RangeRequest):
        return [request.key, *([request.range_end] if request.range_end else [])]
    if not isinstance(request, wire.TxnRequest):
        return []
    keys = [compare.key for compare in request.compare]
    for op in (*request.success, *request.failure):
        asked = op.request_range or op.request_put or op.request_delete_range
        assert asked is not None
        keys.append(asked.key)
        end = getattr(asked, "range_end", b"")
        keys.extend([end] if end else [])
    return keys


class _Session:
    """A user's transport to a :class:`MemoryEtcd` with auth on."""

    def __init__(self, etcd: MemoryEtcd, name: str, password: str) -> None:
        self._etcd = etcd
        self._user = (name, password)

    def send(self, endpoint: int, request: Request, reply: type[Reply], timeout: float) -> Reply:
        return self._etcd.serve(endpoint, request, reply, timeout, user=self._user)

    def drop(self, endpoint: int) -> None:
        """Nothing to forget."""

    def close(self) -> None:
        """Nothing to close."""
