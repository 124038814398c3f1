"""Which transport ``etcd.transport`` means for a process's requests (``ledger.etcd.choice``):
``auto`` takes gRPC for scans over many nodes where a process serves many calls, and HTTP for
the rest, and in a call of its own."""

from __future__ import annotations

import sys

import pytest

from resource_extend.ledger.etcd import choice
from resource_extend.ledger.etcd.choice import Choice, choose, described


@pytest.mark.parametrize("many", [False, True])
@pytest.mark.parametrize("scan", [False, True])
def test_http_and_grpc_are_taken_as_said(many: bool, scan: bool) -> None:
    assert choose("http", many_calls=many, scan=scan) == Choice("http", "etcd.transport: http")
    assert choose("grpc", many_calls=many, scan=scan) == Choice("grpc", "etcd.transport: grpc")


def test_auto_scans_over_grpc_where_a_process_serves_many_calls() -> None:
    assert choose("auto", many_calls=True, scan=True) == Choice("grpc", choice.SCANS)
    assert choose("auto", many_calls=True, scan=False) == Choice("http", choice.ONE_NODE)
    for scan in (False, True):
        assert choose("auto", many_calls=False, scan=scan) == Choice("http", choice.ALONE)


def test_auto_follows_what_the_process_said_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(choice, "PROCESS", choice._Process())
    assert choose("auto", scan=True).transport == "http"
    choice.serves_many_calls()
    assert choose("auto", scan=True).transport == "grpc"
    assert choose("auto").transport == "http"


def test_auto_without_the_grpc_libraries_takes_http_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)
    monkeypatch.delitem(sys.modules, "resource_extend.ledger.etcd.grpc_transport", raising=False)
    taken = choose("auto", many_calls=True, scan=True)
    assert taken.transport == "http"
    assert "grpc is missing" in taken.why and "reinstall resource-extend" in taken.why


def test_what_doctor_and_footprint_say() -> None:
    assert described("auto", resident=True) == (
        "transport auto: core's scans over many nodes through the helper over gRPC, the rest "
        "over HTTP (auto: a scan over many nodes in a process that serves many calls, where "
        "gRPC is faster; a request about one node, answered as soon over etcd's JSON gateway, "
        "with no gRPC channel to open in a call process forked afresh; a call in a process of "
        "its own, where gRPC's import would cost more than it saves)"
    )
    assert described("auto", resident=False).startswith("transport auto: core's calls over HTTP")
    assert described("grpc", resident=True) == (
        "transport grpc: core's calls over gRPC (etcd.transport: grpc)"
    )
