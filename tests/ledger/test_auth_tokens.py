"""etcd checks a password with bcrypt (about 60 ms a time), so a process that makes call after
call (a call process of the resident helper, the exporter) keeps its auth token, and asks for
a new one only when etcd no longer takes it. Both transports, against a real etcd with auth
on, handing out simple tokens or JWTs (what etcd's docs advise for production)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resource_extend.ledger.etcd import kept, transport, wire
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.etcd.transport import HttpTransport, Transport
from resource_extend.ledger.host.config import Auth, EtcdConfig
from tests.etcd_server import Member, etcdctl_binary
from tests.ledger.transports import Calls, Over, Recorded
from tests.secured_etcd import add_user, start_auth_member

AUTHENTICATE = "/v3/auth/authenticate"


@pytest.fixture(params=["simple", "jwt"])
def tokens(request: pytest.FixtureRequest) -> str:
    """The tokens etcd hands out: simple ones, or JWTs."""
    return str(request.param)


@pytest.fixture
def member(tmp_path: Path, tokens: str) -> Iterator[Member]:
    started = start_auth_member(tmp_path, jwt=tokens == "jwt")
    yield started
    started.kill()


@pytest.fixture
def asked(over: Over, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """The authentications this process asks etcd for, from now on."""
    monkeypatch.setattr(kept, "TOKENS", kept.Kept())
    if over == "http":
        return Calls(monkeypatch, HttpTransport, "_post", when=_authenticates).made
    from resource_extend.ledger.etcd.grpc_transport import GrpcTransport

    return Calls(monkeypatch, GrpcTransport, "_authenticate").made


def _authenticates(_: HttpTransport, endpoint: int, path: str, *args: Any, **kw: Any) -> bool:
    return path == AUTHENTICATE


def call(member: Member, over: Over, password: str = "eru-secret") -> int:
    """One call's read: a transport of its own, closed after."""
    auth = Auth(username="eru", password=password)
    settings = EtcdConfig(machines=[member.client_url], auth=auth, transport=over)
    etcd: Transport = open_transport(settings)
    try:
        return etcd.send(0, wire.RangeRequest(key=b"/test-x"), wire.RangeResponse, 5).count
    finally:
        etcd.close()


def set_password(member: Member, password: str) -> None:
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}", "--user=root:root-secret"]
    argv = [*ctl, "user", "passwd", "eru", "--interactive=false"]
    subprocess.run(argv, input=f"{password}\n".encode(), check=True, capture_output=True)


def test_calls_in_one_process_authenticate_once(
    member: Member, over: Over, asked: Recorded
) -> None:
    for _ in range(3):
        assert call(member, over) == 0
    assert len(asked) == 1


def test_a_token_etcd_no_longer_takes_is_asked_for_again(
    member: Member, over: Over, asked: Recorded
) -> None:
    """A password set again (even to the same) voids the user's tokens: the next call is
    refused its token, authenticates afresh, and answers."""
    call(member, over)
    set_password(member, "other")
    set_password(member, "eru-secret")
    assert call(member, over) == 0
    assert len(asked) == 2


def test_an_auth_change_of_another_user_is_authenticated_past_once(
    member: Member, tokens: str, over: Over, asked: Recorded
) -> None:
    """A user added, whoever it is, makes etcd refuse every JWT had before it (with
    ``revision of auth store is old``, not ``unauthenticated``): the next call authenticates
    once more, once, and the calls after it ride on the new token. A simple token outlives
    the change."""
    call(member, over)
    call(member, over)
    add_user(member, "x")
    assert call(member, over) == 0
    assert call(member, over) == 0
    assert len(asked) == (2 if tokens == "jwt" else 1)


def test_another_password_is_another_token(member: Member, over: Over, asked: Recorded) -> None:
    """A token is kept for the credentials it was made from: a config whose password is
    wrong never rides on a token the right one got."""
    call(member, over)
    with pytest.raises(transport.Refused, match="authentication failed"):
        call(member, over, password="wrong")
    assert len(asked) == 2
