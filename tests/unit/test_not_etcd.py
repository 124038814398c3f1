"""``ledger.etcd.transport.not_etcd``: the likely mistake named from what answered (the real
endpoints are in tests/test_wrong_endpoints.py)."""

from __future__ import annotations

from resource_extend.ledger.etcd import http11
from resource_extend.ledger.etcd.transport import (
    PEER_PORT,
    PLAIN_HINT,
    Unavailable,
    _failure,
    not_etcd,
)

TXN = "/v3/kv/txn"


def test_a_tls_only_server_asked_in_plain_text_says_to_write_https() -> None:
    body = b"Client sent an HTTP request to an HTTPS server.\n"
    said = str(not_etcd(2379, TXN, 400, "Bad Request", body, is_etcd=False))
    assert said.endswith("it speaks TLS only: write https://")


def test_the_peer_port_is_named_by_its_number_or_by_etcd_answering_version() -> None:
    by_number = str(
        not_etcd(PEER_PORT, TXN, 404, "Not Found", b"404 page not found\n", is_etcd=False)
    )
    by_answer = str(not_etcd(12380, TXN, 404, "Not Found", b"404 page not found\n", is_etcd=True))
    assert by_number.endswith("is 2380 the peer port? etcd clients use 2379")
    assert by_answer.endswith("is 12380 the peer port? etcd clients use 2379")


def test_anything_else_asks_whether_it_is_the_client_port() -> None:
    said = str(not_etcd(8080, TXN, 501, "Not Implemented", b"", is_etcd=False))
    assert said.startswith("not an etcd client URL (HTTP 501 Not Implemented to /v3/kv/txn)")
    assert "peer" not in said and "client port" in said


def test_a_busy_answer_without_etcds_body_is_unavailable_not_a_wrong_endpoint() -> None:
    """A proxy's 502/503/504 carries its own body: the endpoint is busy, not wrong, so the call
    fails over (and a write's outcome stays unknown) rather than being refused."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import pytest

    from resource_extend.ledger.etcd import wire
    from resource_extend.ledger.etcd.transport import HttpTransport, NotEtcd, Unavailable
    from resource_extend.ledger.host.config import EtcdConfig

    class Busy(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(503)
            self.send_header("Content-Length", "11")
            self.end_headers()
            self.wfile.write(b"try later\r\n")

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = EtcdConfig(machines=[f"http://127.0.0.1:{server.server_address[1]}"])
    transport = HttpTransport(settings)
    try:
        with pytest.raises(Unavailable) as info:
            transport.send(0, wire.RangeRequest(key=b"k"), wire.RangeResponse, 2.0)
        assert not isinstance(info.value, NotEtcd) and "HTTP 503" in str(info.value)
    finally:
        transport.close()
        server.shutdown()
        server.server_close()


def test_a_tls_handshake_reset_unanswered_hints_at_a_plain_etcd_but_still_fails_over() -> None:
    """A plain server answers a TLS hello and closes with the hello's rest unread: the reset
    may beat its answer. Then it is not known to be a wrong endpoint (an etcd going down resets
    too): Unavailable, so the call fails over, with the hint."""
    connection = http11.Connection("127.0.0.1", 2379, timeout=1.0)
    connection.in_handshake = True
    found = _failure(
        ConnectionResetError(104, "Connection reset by peer"), connection, tls=True, cert=""
    )
    assert isinstance(found, Unavailable) and PLAIN_HINT in str(found)
    connection.in_handshake = False  # a reset after the request went out: no hint
    later = _failure(
        ConnectionResetError(104, "Connection reset by peer"), connection, tls=True, cert=""
    )
    assert isinstance(later, Unavailable) and PLAIN_HINT not in str(later)
