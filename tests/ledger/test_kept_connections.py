"""A process keeps its HTTP connections to etcd from one call to the next (a call process of the
resident helper, the exporter): a call after the first dials nothing. A kept connection etcd
let go (restarted, or closed it idle) is found out before a request goes out on it and another
is dialled: the call succeeds, says nothing of TLS and is not "outcome unknown"; a request
that went out as etcd closed it is asked again afresh if it changes nothing, and settled by its
op id (as any lost answer) if it may write. Against a real etcd, and for the race real etcd
cannot be made to hit, a scripted server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from resource_extend.ledger.etcd import http11, kept, wire
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.etcd.transport import Unavailable
from resource_extend.ledger.host.config import EtcdConfig
from tests.etcd_server import Cluster
from tests.faults import LetsGoSecondRequests
from tests.ledger.transports import Calls, Recorded, put, version


@pytest.fixture
def dialled(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """The connections this process dials from now on (none kept from before)."""
    monkeypatch.setattr(kept, "CONNECTIONS", kept.Idle())
    return Calls(monkeypatch, http11, "_connected").made


def read(endpoint: str) -> int:
    """One call's read, over HTTP: ``/x``'s version."""
    return version(EtcdConfig(machines=[endpoint], transport="http"))


def test_calls_in_one_process_dial_once(member: Cluster, dialled: Recorded) -> None:
    (endpoint,) = member.endpoints
    for _ in range(3):
        assert read(endpoint) == 0
    put(EtcdConfig(machines=[endpoint], transport="http"), b"/k")
    assert len(dialled) == 1


def test_a_connection_etcd_let_go_is_found_out_and_dialled_again(
    member: Cluster, dialled: Recorded
) -> None:
    (endpoint,) = member.endpoints
    assert read(endpoint) == 0
    member.kill()
    member.start()  # every connection it had is gone
    # on a connection dialled afresh: once
    put(EtcdConfig(machines=[endpoint], transport="http"), b"/k")
    assert version(EtcdConfig(machines=[endpoint], transport="http"), b"/k") == 1
    assert len(dialled) == 2


def test_kept_connections_are_bounded_and_never_shared() -> None:
    """Taken while in use (two transports at once get two), at most ``MAX_IDLE`` kept a key."""
    pool: kept.Idle[str, Fake] = kept.Idle()
    taken = [Fake() for _ in range(kept.MAX_IDLE + 2)]
    for connection in taken:
        pool.give("e", connection)
    assert sum(connection.closed for connection in taken) == 2
    first, second = pool.take("e"), pool.take("e")
    assert first is not None and second is not None and first is not second
    dead = pool.take("e")
    assert dead is not None
    dead.alive = False
    pool.give("e", dead)
    found = [pool.take("e") for _ in range(kept.MAX_IDLE)]
    assert dead not in found and dead.closed


class Fake:
    def __init__(self) -> None:
        self.alive, self.closed = True, False

    def idle(self) -> bool:
        if not self.alive:
            self.close()
        return self.alive and not self.closed

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def scripted() -> Iterator[LetsGoSecondRequests]:
    server = LetsGoSecondRequests()
    yield server
    server.close()


def test_a_read_whose_kept_connection_was_let_go_under_it_is_asked_again(
    scripted: LetsGoSecondRequests, dialled: Recorded
) -> None:
    endpoint = f"http://127.0.0.1:{scripted.port}"
    assert read(endpoint) == 0
    assert read(endpoint) == 0  # its kept connection closed under it: asked again, afresh
    assert (scripted.requests, len(dialled)) == (3, 2)


def test_a_write_whose_kept_connection_was_let_go_under_it_is_not_sent_again(
    scripted: LetsGoSecondRequests, dialled: Recorded
) -> None:
    endpoint = f"http://127.0.0.1:{scripted.port}"
    assert read(endpoint) == 0
    transport = open_transport(EtcdConfig(machines=[endpoint], transport="http"))
    try:
        with pytest.raises(Unavailable) as failed:
            transport.send(0, wire.TxnRequest(success=[wire.put(b"/k", b"v")]), wire.TxnResponse, 5)
    finally:
        transport.close()
    assert "kept from an earlier call" in str(failed.value) and "TLS" not in str(failed.value)
    assert (scripted.requests, len(dialled)) == (2, 1)  # settled by its op id, not resent here
