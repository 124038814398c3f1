"""An ``etcd.machines`` entry that is not etcd's client URL is said as the likely mistake, in
one line, by a verb and by doctor alike: etcd's peer port, another web server, ``https://``
for a plain etcd, ``http://`` for a TLS-only one. Against the real thing each time."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.etcd_server import Member
from tests.plugin import Plugin, failure_line
from tests.secured_etcd import TLSFiles, start_member
from tests.test_doctor import Host, doctor, finding
from tests.test_security import https_etcd, tls_etcd

__all__ = ["https_etcd", "tls_etcd"]  # fixtures, used by name

VERB = "get-node-resource-info"


@pytest.fixture
def host(tmp_path: Path) -> Host:
    root = tmp_path / "host"
    root.mkdir()
    return Host(root)


@pytest.fixture
def plain_member(tmp_path: Path) -> Iterator[Member]:
    member = start_member(tmp_path)
    yield member
    member.kill()


@pytest.fixture
def web_server() -> Iterator[str]:
    """A web server that is not etcd: it answers a POST with 501, as http.server does."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def said(
    entry: str, tmp_path: Path, host: Host, transport: str = "http", **etcd: str
) -> tuple[str, dict[str, str]]:
    """What a verb and doctor say of a config whose one endpoint is ``entry``, over
    ``transport`` (given, whatever the mode: each transport finds its own words)."""
    workdir = tmp_path / f"plugin-{transport}"
    workdir.mkdir()
    plugin = Plugin([entry], workdir, timeout=2, transport=transport, **etcd)
    line = failure_line(plugin.run(VERB, {"nodename": "n1"}), VERB)
    where = entry.split("://")[1]
    return line, finding(doctor(plugin, host), f"etcd {where}")


def test_the_peer_port_is_named_as_such(plain_member: Member, tmp_path: Path, host: Host) -> None:
    line, found = said(plain_member.peer_url, tmp_path, host)
    peer = plain_member.peer_port
    hint = f"is {peer} the peer port? etcd clients use 2379"
    assert "not an etcd client URL (HTTP 404" in line and hint in line, line
    assert found["status"] == "fail" and hint in found["message"], found
    assert "etcd.machines entry" in found["fix"] and "etcd's log" not in found["fix"]


def test_a_web_server_is_not_an_etcd_client_url(
    web_server: str, tmp_path: Path, host: Host
) -> None:
    line, found = said(web_server, tmp_path, host)
    assert "not an etcd client URL (HTTP 501" in line and "etcd's client port" in line, line
    assert "peer port" not in line
    assert found["status"] == "fail" and "not an etcd client URL" in found["message"]


TRANSPORTS = pytest.mark.parametrize("transport", ["http", "grpc"])
"""gRPC's own words named none of these mistakes: each transport gives the same hints."""


@TRANSPORTS
def test_https_for_a_plain_etcd_says_to_write_http(
    plain_member: Member, tmp_path: Path, host: Host, transport: str
) -> None:
    entry = plain_member.client_url.replace("http://", "https://")
    line, found = said(entry, tmp_path, host, transport)
    assert "if this etcd has no TLS, write http://" in line, line
    assert found["status"] == "fail" and "write http://" in found["message"], found
    assert "etcd.ca" not in found["fix"]  # not a CA to set: the scheme is wrong


@TRANSPORTS
def test_http_for_a_tls_only_etcd_says_to_write_https(
    https_etcd: tuple[Member, TLSFiles], tmp_path: Path, host: Host, transport: str
) -> None:
    member, _ = https_etcd
    entry = member.client_url.replace("https://", "http://")
    line, found = said(entry, tmp_path, host, transport)
    assert "(if this etcd serves TLS, write https://)" in line, line
    assert found["status"] == "fail" and "write https://" in found["message"], found
    assert "write https://" in found["fix"], found  # not only "start etcd there"


@TRANSPORTS
def test_a_missing_or_expired_client_certificate_is_named(
    tls_etcd: tuple[Member, TLSFiles], tmp_path: Path, host: Host, transport: str
) -> None:
    """etcd asks for a client certificate (--client-cert-auth): none given, or one that has
    expired, was said as "sslv3 alert bad certificate" over HTTP and as raw gRPC text."""
    member, files = tls_etcd
    line, found = said(member.client_url, tmp_path, host, transport, ca=files.ca_file)
    assert "etcd refused this client's certificate" in line, line
    assert "none was given" in line and "set etcd.cert and etcd.key" in line, line
    assert found["status"] == "fail" and "etcd.cert" in found["fix"], found
    old = files.ca.issue_cert(
        "resource-gpu", not_before=dt.datetime(2020, 1, 1), not_after=dt.datetime(2021, 1, 1)
    )
    cert, key = tmp_path / "expired.pem", tmp_path / "expired-key.pem"
    cert.write_bytes(old.cert_chain_pems[0].bytes())
    key.write_bytes(old.private_key_pem.bytes())
    (tmp_path / "again").mkdir()
    line, _ = said(
        member.client_url, tmp_path / "again", host, transport, ca=files.ca_file,
        cert=str(cert), key=str(key),
    )  # fmt: skip
    assert f"etcd.cert '{cert}' expired on Jan  1 00:00:00 2021 GMT: renew it" in line, line
