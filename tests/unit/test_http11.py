"""The hand-written HTTP/1.1 client, ledger/etcd/http11.py, against loopback peers whose every byte
(and when it is sent) the test chooses: no etcd.

Each case runs a :class:`Peer`: a listening socket on 127.0.0.1 and one thread that serves the
connections it accepts, in order, with the handlers the test gives (one per connection), and
counts them all. Every wait on either side is bounded, so a broken client fails a case instead of
hanging it, and each case ends with no thread and no socket left open.
"""

from __future__ import annotations

import _socket
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any

import pytest
import trustme

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.http11 import MAX_HEADER_BYTES, Connection, HTTPError
from resource_extend.ledger.etcd.transport import HttpTransport, Unavailable
from resource_extend.ledger.host.config import EtcdConfig

TIMEOUT = 2.0  # the client's timeout where no case means to reach it
PEER_WAIT = 3.0  # the longest any peer waits for the client
CLOSED_EARLY = "the connection closed before the reply was complete"

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


class Link:
    """One accepted connection, from the peer's side."""

    def __init__(self, sock: socket.socket, peer: Peer) -> None:
        self.sock = sock
        self.peer = peer
        self._buffer = b""

    def request(self) -> bytes:
        """Reads one whole request (head, then a body of its Content-Length) and records it."""
        while b"\r\n\r\n" not in self._buffer:
            self._more()
        head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self._buffer) < length:
            self._more()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        self.peer.requests.append(head + b"\r\n\r\n" + body)
        return body

    def send(self, *pieces: bytes, pause: float = 0.005) -> None:
        """Sends each piece as its own write, pausing between them so that the client's reads
        see them apart."""
        for index, piece in enumerate(pieces):
            if index:
                time.sleep(pause)
            self.sock.sendall(piece)

    def drip(self, data: bytes) -> None:
        """Sends one byte at a time."""
        self.send(*(data[i : i + 1] for i in range(len(data))), pause=0.0005)

    def closed_by_client(self, within: float = PEER_WAIT) -> bool:
        """Whether the client closes its end (and sends nothing more) within ``within`` s."""
        self.sock.settimeout(within)
        try:
            return self.sock.recv(65536) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("the client closed the connection")
        self._buffer += data


Handler = Callable[[Link], None]


class Peer:
    def __init__(self, *handlers: Handler) -> None:
        self.accepted = 0
        self.requests: list[bytes] = []
        self.errors: list[BaseException] = []
        self._handlers = list(handlers)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.02)  # how often the serving thread looks at _stop
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="http11-peer")
        self._thread.start()

    def client(self, timeout: float = TIMEOUT) -> Connection:
        return Connection("127.0.0.1", self.port, timeout=timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(PEER_WAIT + 2)
        self._listener.close()
        assert not self._thread.is_alive(), "the peer's thread did not end"
        if self.errors:
            raise self.errors[0]

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            with sock:
                sock.settimeout(PEER_WAIT)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if not self._handlers:  # a connection the case did not expect: counted, closed
                    continue
                handler = self._handlers.pop(0)
                try:
                    handler(Link(sock, self))
                except BaseException as exc:
                    self.errors.append(exc)


@contextmanager
def serving(*handlers: Handler) -> Iterator[Peer]:
    peer = Peer(*handlers)
    try:
        yield peer
    finally:
        peer.close()


@contextmanager
def client_of(peer: Peer, timeout: float = TIMEOUT) -> Iterator[Connection]:
    with closing(peer.client(timeout)) as connection:
        yield connection


def reply(*pieces: bytes, pause: float = 0.005) -> Handler:
    """A handler that reads one request and answers it with the pieces, one write each."""

    def handler(link: Link) -> None:
        link.request()
        link.send(*pieces, pause=pause)

    return handler


def answers(*replies: bytes) -> Handler:
    """A handler that answers one request after another on one connection, then waits for the
    client to close it."""

    def handler(link: Link) -> None:
        for data in replies:
            link.request()
            link.send(data)
        assert link.closed_by_client()

    return handler


def breaks_off(partial: bytes) -> Handler:
    """A handler that reads the request, sends part of an answer and closes the connection."""

    def handler(link: Link) -> None:
        link.request()
        link.send(partial)

    return handler


def post(connection: Connection, body: bytes = b"{}") -> tuple[int, str, bytes]:
    response = connection.post("/v3/kv/range", body, {"Content-Type": "application/json"})
    return response.status, response.reason, response.body


@pytest.fixture(autouse=True)
def no_thread_left() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    assert set(threading.enumerate()) <= before


# -- the request ------------------------------------------------------------------------------


def test_request_bytes() -> None:
    with serving(reply(OK)) as peer, client_of(peer) as client:
        response = client.post("/v3/kv/txn", b'{"a":1}', {"Content-Type": "application/json"})
        assert (response.status, response.body) == (200, b"ok")
    assert peer.requests == [
        b"POST /v3/kv/txn HTTP/1.1\r\n"
        + f"Host: 127.0.0.1:{peer.port}\r\n".encode()
        + b'Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'
    ]


def fake_addresses(
    monkeypatch: pytest.MonkeyPatch, *ports: int, names: list[bytes] | None = None
) -> None:
    """The resolver answers any name with 127.0.0.1 at each port in turn."""

    def getaddrinfo(name: bytes, port: int, *_: Any) -> list[tuple[Any, ...]]:
        if names is not None:
            names.append(name)
        return [
            (_socket.AF_INET, _socket.SOCK_STREAM, 6, "", ("127.0.0.1", each)) for each in ports
        ]

    monkeypatch.setattr(_socket, "getaddrinfo", getaddrinfo)


def test_an_ipv6_host_goes_in_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(reply(OK)) as peer:
        fake_addresses(monkeypatch, peer.port)
        with closing(Connection("::1", peer.port, timeout=TIMEOUT)) as client:
            assert post(client)[2] == b"ok"
    assert f"\r\nHost: [::1]:{peer.port}\r\n".encode() in peer.requests[0]


def test_a_non_ascii_host_is_resolved_as_idna(monkeypatch: pytest.MonkeyPatch) -> None:
    names: list[bytes] = []
    with serving(reply(OK)) as peer:
        fake_addresses(monkeypatch, peer.port, names=names)
        with closing(Connection("bücher.example", peer.port, timeout=TIMEOUT)) as client:
            assert post(client)[2] == b"ok"
    assert names == [b"xn--bcher-kva.example"]


# -- connecting -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port: int = listener.getsockname()[1]
    return port  # nothing listens there now: a connection is refused


def test_connection_refused() -> None:
    with (
        closing(Connection("127.0.0.1", free_port(), timeout=TIMEOUT)) as client,
        pytest.raises(ConnectionRefusedError),
    ):
        post(client)


def test_the_next_address_is_tried_when_one_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(reply(OK)) as peer:
        fake_addresses(monkeypatch, free_port(), peer.port)
        with closing(Connection("etcd.example", peer.port, timeout=TIMEOUT)) as client:
            assert post(client) == (200, "OK", b"ok")
    assert peer.accepted == 1


def test_the_last_failure_is_raised_when_every_address_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_addresses(monkeypatch, free_port(), free_port())
    with (
        closing(Connection("etcd.example", 2379, timeout=TIMEOUT)) as client,
        pytest.raises(ConnectionRefusedError),
    ):
        post(client)


def test_a_name_without_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_addresses(monkeypatch)
    with (
        closing(Connection("etcd.example", 2379, timeout=TIMEOUT)) as client,
        pytest.raises(OSError, match=r"^no address for etcd\.example$"),
    ):
        post(client)


# -- Content-Length replies -------------------------------------------------------------------


def test_content_length_reply() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world"
    with serving(reply(data)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"hello world")


def test_content_length_reply_one_byte_at_a_time() -> None:
    data = (
        b"HTTP/1.1 201 Created\r\nServer: peer\r\nContent-Type: application/json\r\n"
        b'Content-Length: 13\r\n\r\n{"count":"3"}'
    )

    def handler(link: Link) -> None:
        link.request()
        link.drip(data)

    with serving(handler) as peer, client_of(peer) as client:
        assert post(client) == (201, "Created", b'{"count":"3"}')


def test_content_length_reply_split_mid_line() -> None:
    pieces = (
        b"HTT",
        b"P/1.1 200 O",
        b"K\r",
        b"\nConte",
        b"nt-Length:",
        b" 5\r\n",
        b"\r",
        b"\nhe",
        b"llo",
    )
    with serving(reply(*pieces)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"hello")


def test_header_names_and_values_are_read_loosely() -> None:
    data = b"HTTP/1.1 200 OK\r\ncontent-LENGTH:   5  \r\nX-Empty:\r\n\r\nhello"
    with serving(reply(data)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"hello")


def test_a_large_body() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, many reads
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    with serving(reply(head + body)) as peer, client_of(peer) as client:
        assert post(client)[2] == body


def test_no_body_without_content_length() -> None:
    """204 has no body and needs no Content-Length; the next reply on the connection is read
    from where the first ended."""
    no_content = b"HTTP/1.1 204 No Content\r\n\r\n"
    with serving(answers(no_content, OK)) as peer, client_of(peer) as client:
        assert post(client) == (204, "No Content", b"")
        assert post(client) == (200, "OK", b"ok")
    assert peer.accepted == 1


@pytest.mark.parametrize("length", [b"abc", b"5, 5", b"-2", b""])
def test_a_malformed_content_length(length: bytes) -> None:
    """Never a body cut short (a negative length once returned all but its last bytes): the
    reply is refused and the connection dropped."""
    data = b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\nhello"
    with serving(reply(data), reply(OK)) as peer, client_of(peer) as client:
        with pytest.raises(HTTPError, match=r"^(malformed HTTP reply|negative length)"):
            post(client)
        assert post(client) == (200, "OK", b"ok")  # on a new connection
    assert peer.accepted == 2


# -- the status line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "status", "reason"),
    [
        (b"HTTP/1.1 404 Not Found", 404, "Not Found"),
        (b"HTTP/1.1 503 Service  Unavailable ", 503, "Service  Unavailable "),
        (b"HTTP/1.1 200", 200, ""),
        (b"HTTP/1.1 200 ", 200, ""),
        (b"HTTP/1.0 200 OK", 200, "OK"),
    ],
)
def test_status_line(line: bytes, status: int, reason: str) -> None:
    data = line + b"\r\nContent-Length: 2\r\n\r\nok"
    with serving(reply(data)) as peer, client_of(peer) as client:
        assert post(client) == (status, reason, b"ok")


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"HTTP/2 200 OK", "not an HTTP/1.x reply: 'HTTP/2'"),
        (b"SSH-2.0-OpenSSH_9.6", "malformed HTTP reply"),
        (b"", "malformed HTTP reply"),
        (b"HTTP/1.1", "malformed HTTP reply"),
        (b"HTTP/1.1 OK 200", "malformed HTTP reply"),
    ],
)
def test_a_bad_status_line(line: bytes, error: str) -> None:
    data = line + b"\r\nContent-Length: 2\r\n\r\nok"
    with serving(reply(data), reply(OK)) as peer, client_of(peer) as client:
        with pytest.raises(HTTPError, match=error):
            post(client)
        assert post(client) == (200, "OK", b"ok")  # on a new connection
    assert peer.accepted == 2


def test_interim_replies_are_skipped() -> None:
    """1xx replies come before the final one, unasked (RFC 9110 §15.2): they are read past, and
    the next request gets its own reply, not the one left behind."""
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
    second = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"
    with serving(answers(interim + OK, second)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"ok")
        assert post(client) == (200, "OK", b"second")


def test_interim_replies_split_across_reads() -> None:
    pieces = (
        b"HTTP/1.1 100 Cont",
        b"inue\r\n\r",
        b"\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
        b"\r\nok",
    )
    with serving(reply(*pieces)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"ok")


# -- header size ------------------------------------------------------------------------------


def test_a_header_line_without_end_is_refused() -> None:
    def handler(link: Link) -> None:
        link.request()
        link.send(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (MAX_HEADER_BYTES + 4096))
        assert link.closed_by_client()  # the client gave up: it did not wait for more

    with serving(handler) as peer, client_of(peer) as client:
        started = time.monotonic()
        with pytest.raises(HTTPError, match="reply header too long"):
            post(client)
        assert time.monotonic() - started < TIMEOUT / 2


def test_a_long_header_line_within_the_limit() -> None:
    value = b"v" * (MAX_HEADER_BYTES - 1024)
    data = b"HTTP/1.1 200 OK\r\nX-Long: " + value + b"\r\nContent-Length: 2\r\n\r\nok"
    with serving(reply(data)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"ok")


# -- chunked replies --------------------------------------------------------------------------


def test_chunked_reply() -> None:
    data = CHUNKED_HEAD + b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    with serving(reply(data)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"hello world")


def test_chunk_sizes_are_hexadecimal() -> None:
    data = CHUNKED_HEAD + b"A\r\n0123456789\r\n1b\r\n" + b"x" * 27 + b"\r\n0\r\n\r\n"
    with serving(reply(data)) as peer, client_of(peer) as client:
        assert post(client)[2] == b"0123456789" + b"x" * 27


def test_chunk_extensions_and_trailers() -> None:
    """Extensions are ignored, and trailer fields read to their end: the next reply on the
    connection starts where this one ended."""
    first = (
        CHUNKED_HEAD
        + b'5;name=value\r\nhello\r\n1;a;b="c"\r\n!\r\n0;last\r\n'
        + b"X-Checksum: abc\r\nX-Other: 1\r\n\r\n"
    )
    with serving(answers(first, OK)) as peer, client_of(peer) as client:
        assert post(client) == (200, "OK", b"hello!")
        assert post(client) == (200, "OK", b"ok")
    assert peer.accepted == 1


def test_chunked_is_read_in_any_case_and_wins_over_content_length() -> None:
    data = (
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: Chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n"
    )
    with serving(answers(data, OK)) as peer, client_of(peer) as client:
        assert post(client)[2] == b"hello"
        assert post(client)[2] == b"ok"


def test_chunked_reply_one_byte_at_a_time() -> None:
    data = CHUNKED_HEAD + b"5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"

    def handler(link: Link) -> None:
        link.request()
        link.drip(data)

    with serving(handler) as peer, client_of(peer) as client:
        assert post(client)[2] == b"hello world"


def test_chunks_split_across_reads() -> None:
    pieces = (
        CHUNKED_HEAD + b"1",  # a size line cut in two
        b"0\r\n01234567",  # chunk data cut in two
        b"89abcdef",
        b"\r",  # the CRLF after the data cut in two
        b"\n3\r\nabc\r\n0",
        b"\r\n",
        b"\r\n",
    )
    with serving(reply(*pieces)) as peer, client_of(peer) as client:
        assert post(client)[2] == b"0123456789abcdefabc"


def test_a_large_chunk() -> None:
    chunk = bytes(range(256)) * 800  # over one read's 64 KiB
    data = CHUNKED_HEAD + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n0\r\n\r\n"
    with serving(reply(data)) as peer, client_of(peer) as client:
        assert post(client)[2] == chunk


@pytest.mark.parametrize("size", [b"zz", b"", b"-2"])
def test_a_bad_chunk_size(size: bytes) -> None:
    data = CHUNKED_HEAD + size + b"\r\nhello\r\n0\r\n\r\n"
    with serving(reply(data), reply(OK)) as peer, client_of(peer) as client:
        with pytest.raises(HTTPError, match=r"^(malformed HTTP reply|negative length)"):
            post(client)
        assert post(client) == (200, "OK", b"ok")  # on a new connection
    assert peer.accepted == 2


# -- keep-alive and Connection: close ---------------------------------------------------------


def test_keep_alive_reuses_the_connection() -> None:
    second = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 6\r\n\r\nsecond"
    with serving(answers(OK, second, OK)) as peer, client_of(peer) as client:
        assert post(client)[2] == b"ok"
        assert post(client)[2] == b"second"
        assert post(client)[2] == b"ok"
    assert peer.accepted == 1
    assert len(peer.requests) == 3


@pytest.mark.parametrize("header", [b"Connection: close", b"connection:  Close"])
def test_connection_close_makes_the_client_reconnect(header: bytes) -> None:
    first = b"HTTP/1.1 200 OK\r\n" + header + b"\r\nContent-Length: 5\r\n\r\nfirst"

    def closing_handler(link: Link) -> None:
        link.request()
        link.send(first)
        assert link.closed_by_client(), "the client kept a connection the peer closes"

    with serving(closing_handler, reply(OK)) as peer, client_of(peer) as client:
        assert post(client)[2] == b"first"
        assert post(client)[2] == b"ok"
    assert peer.accepted == 2


def test_connection_close_chunked() -> None:
    first = (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nfirst\r\n0\r\n\r\n"
    )
    with serving(reply(first), reply(OK)) as peer, client_of(peer) as client:
        assert post(client)[2] == b"first"
        assert post(client)[2] == b"ok"
    assert peer.accepted == 2


def test_a_connection_the_peer_closed_while_idle() -> None:
    """A kept-alive connection the peer has since closed fails the next request (it cannot be
    known whether a request got through, so it is not sent again), and the one after that
    connects afresh."""
    closed = threading.Event()

    def then_close(link: Link) -> None:
        link.request()
        link.send(OK)
        link.sock.shutdown(socket.SHUT_RDWR)
        closed.set()

    with serving(then_close, reply(OK)) as peer, client_of(peer) as client:
        assert post(client)[2] == b"ok"
        assert closed.wait(PEER_WAIT)
        with pytest.raises(OSError):
            post(client)
        assert post(client)[2] == b"ok"
    assert peer.accepted == 2


# -- a peer that stops short ------------------------------------------------------------------


@pytest.mark.parametrize(
    "partial",
    [
        pytest.param(b"", id="nothing"),
        pytest.param(b"HTTP/1.1 200", id="mid-status-line"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Le", id="mid-header"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n", id="before-blank-line"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", id="before-body"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", id="mid-body"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\nhello",
            id="mid-body-connection-close",
        ),
        pytest.param(b"HTTP/1.1 100 Continue\r\n\r\n", id="after-interim"),
        pytest.param(CHUNKED_HEAD, id="before-first-chunk"),
        pytest.param(CHUNKED_HEAD + b"1", id="mid-chunk-size"),
        pytest.param(CHUNKED_HEAD + b"5\r\nhel", id="mid-chunk"),
        pytest.param(CHUNKED_HEAD + b"5\r\nhello", id="before-chunk-crlf"),
        pytest.param(CHUNKED_HEAD + b"5\r\nhello\r\n", id="before-last-chunk"),
        pytest.param(CHUNKED_HEAD + b"5\r\nhello\r\n0\r\n", id="before-final-crlf"),
        pytest.param(CHUNKED_HEAD + b"5\r\nhello\r\n0\r\nX-T: 1\r\n", id="mid-trailers"),
    ],
)
def test_a_peer_closing_mid_answer(partial: bytes) -> None:
    """Never a partial reply taken for a whole one, never a wait: an HTTPError (an OSError, which
    the transport reports as Unavailable); what was read of it is gone with the connection."""
    with serving(breaks_off(partial), reply(OK)) as peer, client_of(peer) as client:
        started = time.monotonic()
        with pytest.raises(HTTPError, match=CLOSED_EARLY if partial else "without a byte"):
            post(client)  # closed before a byte: Unanswered, as a TLS-only port does it
        assert time.monotonic() - started < TIMEOUT / 2
        assert post(client) == (200, "OK", b"ok")  # a new connection, nothing left over
    assert peer.accepted == 2


def test_a_peer_that_never_answers() -> None:
    def silent(link: Link) -> None:
        link.request()
        assert link.closed_by_client(), "the client did not close the connection it gave up"

    with serving(silent) as peer, client_of(peer, timeout=0.2) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            post(client)
        assert 0.15 < time.monotonic() - started < 1.5


def test_a_peer_that_stops_mid_body_hits_the_timeout() -> None:
    def stalls(link: Link) -> None:
        link.request()
        link.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
        assert link.closed_by_client()

    with serving(stalls, reply(OK)) as peer, client_of(peer, timeout=0.2) as client:
        with pytest.raises(TimeoutError):
            post(client)
        client.timeout = TIMEOUT
        assert post(client) == (200, "OK", b"ok")  # a new connection, nothing left over
    assert peer.accepted == 2


# -- TLS --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


def over_tls(context: ssl.SSLContext, handler: Handler) -> Handler:
    def secure(link: Link) -> None:
        with context.wrap_socket(link.sock, server_side=True) as sock:
            handler(Link(sock, link.peer))

    return secure


def test_tls(ca: trustme.CA) -> None:
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    with (
        serving(over_tls(server_context(ca), answers(OK, OK))) as peer,
        closing(Connection("127.0.0.1", peer.port, timeout=TIMEOUT, tls=client_context)) as c,
    ):
        assert post(c) == (200, "OK", b"ok")
        assert post(c) == (200, "OK", b"ok")
    assert peer.accepted == 1
    assert peer.requests[0].startswith(b"POST /v3/kv/range HTTP/1.1\r\n")


def test_tls_with_an_untrusted_certificate(ca: trustme.CA) -> None:
    context = server_context(ca)

    def refused(link: Link) -> None:
        with pytest.raises(ssl.SSLError):  # the client's alert ends the handshake
            context.wrap_socket(link.sock, server_side=True)

    untrusting = ssl.create_default_context()  # the system's CAs: not the test's
    with (
        serving(refused) as peer,
        closing(Connection("127.0.0.1", peer.port, timeout=TIMEOUT, tls=untrusting)) as c,
    ):
        with pytest.raises(ssl.SSLCertVerificationError):
            post(c)
        assert peer.requests == []


# -- through the transport --------------------------------------------------------------------


def test_the_transport_reports_a_broken_reply_as_unavailable() -> None:
    body = b'{"count":"3"}'
    good = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n" + body
    broken = breaks_off(b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"cou')
    with serving(broken, reply(good)) as peer:
        transport = HttpTransport(EtcdConfig(machines=[f"http://127.0.0.1:{peer.port}"]))
        try:
            request = wire.RangeRequest(key=b"k")
            with pytest.raises(Unavailable, match=f"unavailable: {CLOSED_EARLY}"):
                transport.send(0, request, wire.RangeResponse, TIMEOUT)
            assert transport.send(0, request, wire.RangeResponse, TIMEOUT).count == 3
        finally:
            transport.close()
    assert peer.accepted == 2


def test_the_transport_reports_a_timeout_as_deadline_exceeded() -> None:
    def silent(link: Link) -> None:
        link.request()
        assert link.closed_by_client()

    with serving(silent) as peer:
        transport = HttpTransport(EtcdConfig(machines=[f"http://127.0.0.1:{peer.port}"]))
        try:
            with pytest.raises(Unavailable, match="deadline_exceeded"):
                transport.send(0, wire.RangeRequest(key=b"k"), wire.RangeResponse, 0.2)
        finally:
            transport.close()
