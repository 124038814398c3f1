"""A process makes a TLS context (gRPC: channel credentials) once for the files it is made of, as
they are: a call process of the resident helper (or the exporter) does not load its CAs on
every call (the system's take about 20 ms), and a CA or client certificate changed on disk is
used from the next call on. Against a real etcd that asks for client certificates."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from resource_extend.ledger.etcd import transport, wire
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.etcd.kept import Kept
from resource_extend.ledger.host.config import EtcdConfig
from tests.etcd_server import Member
from tests.ledger.transports import Calls, Over, Recorded
from tests.secured_etcd import TLSFiles, start_tls_member


@pytest.fixture
def tls_etcd(tmp_path: Path) -> Iterator[tuple[Member, TLSFiles]]:
    member, files = start_tls_member(tmp_path)
    yield member, files
    member.kill()


@pytest.fixture
def made(over: Over, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """The TLS contexts (gRPC: channel credentials) this process makes from now on."""
    if over == "http":
        monkeypatch.setattr(transport, "_contexts", Kept())
        return Calls(monkeypatch, ssl, "create_default_context").made
    import grpc

    from resource_extend.ledger.etcd import grpc_transport

    monkeypatch.setattr(grpc_transport, "_credentials", Kept())
    return Calls(monkeypatch, grpc, "ssl_channel_credentials").made


def call(member: Member, files: TLSFiles, over: Over) -> int:
    """One call's read: a transport of its own, closed after."""
    settings = EtcdConfig(
        machines=[member.client_url], ca=files.ca_file, cert=files.client_cert,
        key=files.client_key, transport=over,
    )  # fmt: skip
    etcd = open_transport(settings)
    try:
        return etcd.send(0, wire.RangeRequest(key=b"/x"), wire.RangeResponse, 5).count
    finally:
        etcd.close()


def test_calls_in_one_process_make_one_context(
    tls_etcd: tuple[Member, TLSFiles], over: Over, made: Recorded
) -> None:
    member, files = tls_etcd
    for _ in range(3):
        assert call(member, files, over) == 0
    assert len(made) == 1


def test_a_ca_or_certificate_changed_on_disk_makes_a_new_context(
    tls_etcd: tuple[Member, TLSFiles], over: Over, made: Recorded
) -> None:
    member, files = tls_etcd
    call(member, files, over)
    ca = Path(files.ca_file)
    ca.write_bytes(ca.read_bytes() + b"\n")  # the same CA, other bytes
    assert call(member, files, over) == 0
    client = Path(files.client_cert)
    client.write_bytes(client.read_bytes() + b"\n")
    assert call(member, files, over) == 0
    assert len(made) == 3


def test_the_system_cas_are_known_by_their_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "cas.pem"
    bundle.write_bytes(TLSFiles(tmp_path).ca.cert_pem.bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    before = transport._system_cas_files()
    assert transport._system_cas_files() == before
    bundle.write_bytes(bundle.read_bytes() + b"\n")
    assert transport._system_cas_files() != before
