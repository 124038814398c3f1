"""What every transport to etcd promises the store, as one abstract test case.

The store (``ledger.store``) trusts a transport (``ledger.etcd.transport.Transport``) to carry
etcd's KV semantics unchanged and to report failures in the two kinds the connection acts on.
:class:`TransportContract` says what that means, test by test; each transport's test case
inherits it and says only how to reach etcd (the way the ``eventsourcing`` library tests every
recorder through one abstract case):

* ``tests/ledger/test_transports.py``: the HTTP and the gRPC transport, against real etcd;
* ``tests/unit/test_memory_etcd.py``: the in-memory fake the unit tests trust
  (``tests/unit/memory_etcd.py``), in-process.

The promises:

* **ranges**: one key or ``[key, range_end)`` in key order; ``limit`` with ``more`` and a
  ``count`` that ignores it; ``keys_only``, ``count_only``, descending order; reads as of an
  earlier ``revision``, and a refusal of a future one;
* **transactions**: compares that hold run the success ops, else the failure ops; one revision
  per transaction that writes, none for one that only reads; etcd's refusals (too many ops,
  one key twice);
* **failures**: a request that never left (nothing listens) and one that got no answer in time
  raise ``Unavailable``; so does a write whose answer was lost after etcd applied it (the store
  then settles it by its op id); a transport that failed goes on working once etcd answers;
* **auth**: a user's requests are served within their grant and refused outside it; a wrong
  password and no credentials are refused.

A contract test names no transport: what differs (which server, which fault) is the subclass's.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator

import pytest

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.transport import Refused, Transport, Unavailable

USER, PASSWORD = "eru", "eru-secret"
"""The user :meth:`TransportContract.as_user` knows: it may read and write keys under
``/test-`` (as ``tests.secured_etcd.start_auth_member`` grants), and nothing else."""

EVENT = b'{"change":{}}'
"""A value shaped as an event: what ``tests.faults.AnswerDroppingProxy`` recognises a write by
over gRPC."""


class TransportContract(ABC):
    """The contract; a subclass says how to reach etcd, healthy or at fault."""

    timeout = 2.0
    """Seconds each request may take."""

    # -- what a transport's test case provides -----------------------------------------------

    @abstractmethod
    def transport(self) -> Transport:
        """A transport whose endpoint 0 is a healthy etcd, the same one on every call."""

    @abstractmethod
    def unreachable(self) -> Transport:
        """A transport whose endpoint 0 refuses connections: no request leaves."""

    @abstractmethod
    def silent(self) -> Transport:
        """A transport whose endpoint 0 accepts a connection and never answers."""

    @abstractmethod
    def losing_next_answer(self) -> Transport:
        """A transport to the healthy etcd whose next write is applied and its answer lost."""

    @abstractmethod
    def as_user(self, name: str, password: str) -> Transport:
        """A transport to an etcd with auth on, as ``name`` (``""``: no credentials)."""

    # -- the contract's own ---------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _keys_of_its_own(self) -> Iterator[None]:
        """Keys no other test reads (etcd may be shared), and the transports closed after."""
        self.prefix = f"/test-{uuid.uuid4().hex}/".encode()
        self._opened: list[Transport] = []
        yield
        for opened in self._opened:
            opened.close()

    def key(self, name: str) -> bytes:
        return self.prefix + name.encode()

    def opened(self, transport: Transport) -> Transport:
        self._opened.append(transport)
        return transport

    def etcd(self) -> Transport:
        return self.opened(self.transport())

    def read(self, request: wire.RangeRequest, via: Transport | None = None) -> wire.RangeResponse:
        return (via or self.etcd()).send(0, request, wire.RangeResponse, self.timeout)

    def get(self, name: str, via: Transport | None = None) -> wire.KeyValue | None:
        kvs = self.read(wire.RangeRequest(key=self.key(name)), via).kvs
        return kvs[0] if kvs else None

    def txn(self, request: wire.TxnRequest, via: Transport | None = None) -> wire.TxnResponse:
        return (via or self.etcd()).send(0, request, wire.TxnResponse, self.timeout)

    def put(self, *pairs: tuple[str, bytes], via: Transport | None = None) -> int:
        """Put each (name, value) in one transaction; the revision it made."""
        txn = wire.TxnRequest(success=[wire.put(self.key(name), value) for name, value in pairs])
        answer = self.txn(txn, via)
        assert answer.succeeded
        return answer.header.revision

    def everything(self, **asked: object) -> wire.RangeRequest:
        """A range over every key of this test (``asked``: its other fields)."""
        end = self.prefix[:-1] + bytes((self.prefix[-1] + 1,))
        return wire.RangeRequest(key=self.prefix, range_end=end, **asked)  # type: ignore[arg-type]

    # -- ranges -----------------------------------------------------------------------------

    def test_a_missing_key_reads_as_none_at_the_current_revision(self) -> None:
        revision = self.put(("other", b"v"))
        answer = self.read(wire.RangeRequest(key=self.key("missing")))
        assert (answer.kvs, answer.count, answer.more) == ([], 0, False)
        assert answer.header.revision >= revision

    def test_a_put_is_read_back_with_its_revision_and_version(self) -> None:
        first = self.put(("a", b"one"))
        second = self.put(("a", b"two"))
        found = self.get("a")
        assert found is not None
        assert (found.key, found.value) == (self.key("a"), b"two")
        assert (found.mod_revision, found.version) == (second, 2)
        assert second > first

    def test_a_range_reads_its_keys_in_order_and_none_past_its_end(self) -> None:
        self.put(("c", b"3"), ("a", b"1"), ("b", b"2"))
        self.put(("b", b"2'"))
        outside = self.prefix[:-1] + b"0"  # sorts after the prefix's '/'
        self.txn(wire.TxnRequest(success=[wire.put(outside, b"x")]))
        answer = self.read(self.everything())
        assert [(kv.key, kv.value) for kv in answer.kvs] == [
            (self.key("a"), b"1"),
            (self.key("b"), b"2'"),
            (self.key("c"), b"3"),
        ]
        assert answer.count == 3

    def test_a_limit_says_there_is_more_and_counts_them_all(self) -> None:
        self.put(*((f"k{i}", b"v") for i in range(5)))
        answer = self.read(self.everything(limit=2))
        assert [kv.key for kv in answer.kvs] == [self.key("k0"), self.key("k1")]
        assert (answer.more, answer.count) == (True, 5)
        whole = self.read(self.everything(limit=5))
        assert (len(whole.kvs), whole.more) == (5, False)

    def test_keys_only_and_count_only(self) -> None:
        self.put(("a", b"1"), ("b", b"2"))
        keys = self.read(self.everything(keys_only=True))
        assert [(kv.key, kv.value) for kv in keys.kvs] == [
            (self.key("a"), b""),
            (self.key("b"), b""),
        ]
        assert all(kv.mod_revision and kv.version == 1 for kv in keys.kvs)
        counted = self.read(self.everything(count_only=True))
        assert (counted.kvs, counted.count, counted.more) == ([], 2, False)

    def test_descending_order_with_a_limit_reads_the_last_keys(self) -> None:
        self.put(*((f"k{i}", b"v") for i in range(4)))
        answer = self.read(self.everything(sort_order="DESCEND", limit=2))
        assert [kv.key for kv in answer.kvs] == [self.key("k3"), self.key("k2")]
        assert answer.more

    def test_a_read_at_an_earlier_revision_sees_the_keys_as_they_were(self) -> None:
        before = self.put(("a", b"old"), ("gone", b"here"))
        self.put(("a", b"new"))
        self.txn(wire.TxnRequest(success=[wire.delete(self.key("gone"))]))
        then = self.read(self.everything(revision=before))
        assert [(kv.key, kv.value) for kv in then.kvs] == [
            (self.key("a"), b"old"),
            (self.key("gone"), b"here"),
        ]
        now = self.read(self.everything())
        assert [(kv.key, kv.value) for kv in now.kvs] == [(self.key("a"), b"new")]

    def test_a_future_revision_is_refused(self) -> None:
        now = self.put(("a", b"1"))
        with pytest.raises(Refused, match="future revision"):
            self.read(wire.RangeRequest(key=self.key("a"), revision=now + 1000))

    # -- transactions -----------------------------------------------------------------------

    def test_a_compare_that_holds_runs_the_success_ops_in_one_revision(self) -> None:
        made = self.put(("a", b"1"))
        txn = wire.TxnRequest(
            compare=[wire.unchanged_since(self.key("a"), made)],
            success=[
                wire.put(self.key("a"), b"2"),
                wire.put(self.key("b"), b"1"),
                wire.get(self.key("a")),
                wire.get(self.key("a"), self.key("c"), count_only=True),
            ],
            failure=[wire.put(self.key("lost"), b"x")],
        )
        answer = self.txn(txn)
        assert answer.succeeded
        assert answer.header.revision == made + 1
        # Its own puts, seen by the ranges after them, at its revision.
        [seen] = answer.ranges()[2].kvs
        assert (seen.value, seen.mod_revision, seen.version) == (b"2", made + 1, 2)
        assert answer.ranges()[3].count == 2
        assert [self.get(name).mod_revision for name in ("a", "b")] == [made + 1] * 2  # type: ignore[union-attr]
        assert self.get("lost") is None

    def test_a_compare_that_fails_runs_the_failure_ops_and_writes_nothing_else(self) -> None:
        made = self.put(("a", b"1"))
        self.put(("a", b"2"))  # a writer in between: "a" changed since `made`
        txn = wire.TxnRequest(
            compare=[wire.unchanged_since(self.key("a"), made)],
            success=[wire.put(self.key("a"), b"mine")],
            failure=[wire.get(self.key("a"))],
        )
        answer = self.txn(txn)
        assert not answer.succeeded
        assert [kv.value for kv in answer.ranges()[0].kvs] == [b"2"]
        assert self.get("a").value == b"2"  # type: ignore[union-attr]

    def test_an_absent_key_is_unchanged_since_zero_and_exists_is_false(self) -> None:
        absent = self.key("absent")
        create = wire.TxnRequest(
            compare=[wire.unchanged_since(absent, 0)], success=[wire.put(absent, b"1")]
        )
        assert self.txn(create).succeeded
        assert not self.txn(create).succeeded  # now it exists: a second creator loses
        missing = wire.TxnRequest(compare=[wire.exists(self.key("never"))])
        assert not self.txn(missing).succeeded

    def test_a_transaction_that_only_reads_makes_no_revision(self) -> None:
        made = self.put(("a", b"1"))
        answer = self.txn(
            wire.TxnRequest(success=[wire.get(self.key("a")), wire.get(self.key("b"))])
        )
        assert answer.succeeded
        assert [len(reply.kvs) for reply in answer.ranges()] == [1, 0]
        assert self.get("a").mod_revision == made  # type: ignore[union-attr]
        deleting_nothing = wire.TxnRequest(success=[wire.delete(self.key("none"))])
        assert self.txn(deleting_nothing).header.revision == made

    def test_a_delete_removes_a_range_and_a_put_after_it_starts_over(self) -> None:
        self.put(("a", b"1"), ("b", b"1"), ("c", b"1"))
        self.put(("a", b"2"))
        self.txn(wire.TxnRequest(success=[wire.delete(self.key("a"), self.key("c"))]))
        assert [kv.key for kv in self.read(self.everything()).kvs] == [self.key("c")]
        self.put(("a", b"3"))
        assert self.get("a").version == 1  # type: ignore[union-attr]

    def test_more_operations_than_etcd_takes_are_refused_and_nothing_is_written(self) -> None:
        txn = wire.TxnRequest(success=[wire.put(self.key(f"k{i}"), b"v") for i in range(129)])
        with pytest.raises(Refused, match="too many operations"):
            self.txn(txn)
        assert self.read(self.everything(count_only=True)).count == 0

    def test_one_key_put_twice_in_a_branch_is_refused(self) -> None:
        twice = wire.TxnRequest(
            success=[wire.put(self.key("a"), b"1"), wire.put(self.key("a"), b"2")]
        )
        with pytest.raises(Refused, match="duplicate key"):
            self.txn(twice)
        assert self.get("a") is None

    # -- failures ---------------------------------------------------------------------------

    def test_an_endpoint_that_refuses_connections_is_unavailable_and_nothing_is_written(
        self,
    ) -> None:
        down = self.opened(self.unreachable())
        with pytest.raises(Unavailable):
            self.put(("a", b"1"), via=down)
        with pytest.raises(Unavailable):
            self.get("a", via=down)
        assert self.get("a") is None

    def test_an_endpoint_that_never_answers_is_unavailable_once_the_time_is_up(self) -> None:
        hung = self.opened(self.silent())
        with pytest.raises(Unavailable, match="deadline_exceeded"):
            hung.send(0, wire.RangeRequest(key=self.key("a")), wire.RangeResponse, 0.3)

    def test_a_write_whose_answer_is_lost_is_unavailable_though_etcd_applied_it(self) -> None:
        losing = self.opened(self.losing_next_answer())
        with pytest.raises(Unavailable):
            self.put(("a", EVENT), via=losing)
        found = self.get("a")
        assert found is not None and found.value == EVENT
        self.put(("b", EVENT), via=losing)  # only that answer was lost
        assert self.get("b", via=losing) is not None

    def test_a_dropped_or_closed_transport_asks_afresh(self) -> None:
        etcd = self.etcd()
        self.put(("a", b"1"), via=etcd)
        etcd.drop(0)
        assert self.get("a", via=etcd) is not None
        etcd.close()
        again = self.etcd()
        assert self.get("a", via=again) is not None

    # -- auth -------------------------------------------------------------------------------

    def test_a_user_reads_and_writes_within_its_grant(self) -> None:
        user = self.opened(self.as_user(USER, PASSWORD))
        self.put(("a", b"1"), via=user)
        assert self.get("a", via=user).value == b"1"  # type: ignore[union-attr]

    def test_a_user_is_refused_outside_its_grant(self) -> None:
        user = self.opened(self.as_user(USER, PASSWORD))
        with pytest.raises(Refused, match="permission denied"):
            user.send(0, wire.RangeRequest(key=b"/elsewhere"), wire.RangeResponse, self.timeout)

    def test_a_wrong_password_is_refused(self) -> None:
        wrong = self.opened(self.as_user(USER, "not-the-password"))
        with pytest.raises(Refused, match="authentication failed"):
            self.get("a", via=wrong)

    def test_no_credentials_are_refused_where_auth_is_on(self) -> None:
        anonymous = self.opened(self.as_user("", ""))
        with pytest.raises(Refused):
            self.get("a", via=anonymous)
