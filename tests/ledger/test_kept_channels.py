"""Over gRPC, a process keeps its channels to etcd from one call to the next (a call process of
the resident helper, the exporter), as it keeps HTTP connections: a call after the first makes
no channel. A channel etcd let go reconnects by itself; one that failed a request is forgotten,
so the next request goes out on a fresh channel at once, instead of failing while the old one
waits out gRPC's reconnect backoff. Against a real etcd."""

from __future__ import annotations

import os

import grpc
import pytest

from resource_extend.ledger.etcd import grpc_transport, kept
from resource_extend.ledger.etcd.transport import Unavailable
from resource_extend.ledger.host.config import EtcdConfig
from tests.etcd_server import Cluster
from tests.ledger.transports import Calls, Recorded, put, version

pytestmark = pytest.mark.grpc


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """The channels this process makes from now on (none kept from before)."""
    monkeypatch.setattr(grpc_transport, "CHANNELS", kept.Kept())
    return Calls(monkeypatch, grpc, "insecure_channel").made


def config(endpoint: str) -> EtcdConfig:
    return EtcdConfig(machines=[endpoint], transport="grpc")


def read(endpoint: str, key: bytes = b"/x") -> int:
    """One call's read, over gRPC: the key's version."""
    return version(config(endpoint), key)


def test_calls_in_one_process_make_one_channel(member: Cluster, made: Recorded) -> None:
    (endpoint,) = member.endpoints
    for _ in range(3):
        assert read(endpoint) == 0
    put(config(endpoint), b"/k")
    assert (read(endpoint, b"/k"), len(made)) == (1, 1)


def test_a_channel_etcd_let_go_serves_the_next_call(member: Cluster, made: Recorded) -> None:
    (endpoint,) = member.endpoints
    assert read(endpoint) == 0
    member.kill()
    member.start()  # every connection it had is gone
    put(config(endpoint), b"/k")  # the write went once
    assert read(endpoint, b"/k") == 1


def test_a_channel_that_failed_is_never_asked_again(
    member: Cluster, made: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """etcd down: calls fail, and a channel that tried to connect goes into gRPC's reconnect
    backoff (a second and more), in which it fails every request at once. etcd back: the next
    call succeeds on a fresh channel of its own connections. (With the failed channel kept, it
    failed; so it did on a fresh channel sharing the failed one's connection, gRPC's default.)"""
    # A backoff longer than etcd takes to come back, so that the race CI met is met here too.
    long_backoff = [(f"grpc.{name}_reconnect_backoff_ms", 20_000) for name in ("initial", "min")]
    monkeypatch.setattr(
        grpc_transport, "_GRPC_OPTIONS", [*grpc_transport._GRPC_OPTIONS, *long_backoff]
    )
    (endpoint,) = member.endpoints
    assert read(endpoint) == 0
    member.kill()
    for _ in range(2):  # the second, at the latest, tries to connect, and is refused
        with pytest.raises(Unavailable):
            read(endpoint)
    member.start()
    put(config(endpoint), b"/k")
    assert read(endpoint, b"/k") == 1
    assert len(made) == 3


def test_a_forked_child_makes_its_own_channel(member: Cluster, made: Recorded) -> None:
    (endpoint,) = member.endpoints
    assert read(endpoint) == 0
    key = (config(endpoint).endpoints[0], None)
    assert grpc_transport.CHANNELS.get(key) is not None
    pid = os.fork()
    if pid == 0:  # the child: its parent's channel is not its to use
        os._exit(0 if grpc_transport.CHANNELS.get(key) is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert read(endpoint) == 0 and len(made) == 1
