"""Which transport ``etcd.transport`` means in a process (``ledger.etcd.choice``): ``auto``
takes gRPC where a process serves many calls, and HTTP in a call of its own."""

from __future__ import annotations

import sys

import pytest

from resource_extend.ledger.etcd import choice
from resource_extend.ledger.etcd.choice import Choice, choose, described


@pytest.mark.parametrize("many", [False, True])
def test_http_and_grpc_are_taken_as_said(many: bool) -> None:
    assert choose("http", many_calls=many) == Choice("http", "etcd.transport: http")
    assert choose("grpc", many_calls=many) == Choice("grpc", "etcd.transport: grpc")


def test_auto_takes_http_for_one_call_and_grpc_for_many() -> None:
    assert choose("auto", many_calls=False).transport == "http"
    assert choose("auto", many_calls=True).transport == "grpc"


def test_auto_follows_what_the_process_said_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(choice, "PROCESS", choice._Process())
    assert choose("auto").transport == "http"
    choice.serves_many_calls()
    assert choose("auto").transport == "grpc"


def test_auto_without_the_grpc_libraries_takes_http_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)
    monkeypatch.delitem(sys.modules, "resource_extend.ledger.etcd.grpc_transport", raising=False)
    taken = choose("auto", many_calls=True)
    assert taken.transport == "http"
    assert "grpc is missing" in taken.why and "reinstall resource-extend" in taken.why


def test_what_doctor_and_footprint_say() -> None:
    assert described("auto", resident=True) == (
        "transport auto: core's calls through the helper over gRPC, those in a process of "
        "their own over HTTP (auto: a process that serves many calls, where gRPC is faster; "
        "a call in a process of its own, where gRPC's import would cost more than it saves)"
    )
    assert described("auto", resident=False).startswith("transport auto: core's calls over HTTP")
    assert described("grpc", resident=True) == (
        "transport grpc: core's calls over gRPC (etcd.transport: grpc)"
    )
