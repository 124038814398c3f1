"""Just enough HTTP/1.1 to POST JSON to etcd's gateway (and GET its ``/version``): one keep-alive
connection, requests sent one at a time, replies read by Content-Length or chunked transfer
coding (RFC 9112).

Why not ``http.client``: importing it pulls in ``email`` and ``ssl``, about 14 ms, more than
half of what a whole plugin call may cost. This module speaks plain HTTP over ``_socket``, the C
module under ``socket`` (whose own import costs a call without the resident helper a tenth of
its time), and loads ``socket`` and ``ssl`` only for an HTTPS endpoint.
"""

from __future__ import annotations

import _socket
import time
from typing import TYPE_CHECKING

from resource_extend.ledger.host.endpoints import host_port

if TYPE_CHECKING:
    import ssl
    from datetime import datetime

MAX_HEADER_BYTES = 64 * 1024


class HTTPError(OSError):
    """The connection failed, or the peer broke the protocol."""


class Unanswered(HTTPError):
    """The peer closed the connection without a byte of reply (as etcd's TLS-only port does
    with a plain request)."""


class Response:
    def __init__(
        self, status: int, reason: str, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers or {}
        """The reply's header fields, by lower-cased name (the last of a repeated one)."""

    def date(self) -> datetime | None:
        """When the server says it answered (its ``Date`` field, to the second, in UTC);
        None when it sent none or one that is not an HTTP date."""
        from email.utils import parsedate_to_datetime  # only doctor asks: not on a call's path

        try:
            when = parsedate_to_datetime(self.headers.get("date", ""))
        except (TypeError, ValueError, IndexError):
            return None
        return when if when.tzinfo is not None else None


class Connection:
    def __init__(
        self, host: str, port: int, *, timeout: float, tls: ssl.SSLContext | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        """Seconds one request may take, its reply whole: a reply that trickles in a byte at
        a time runs out of it too (a timeout per read would wait for ever)."""
        self._deadline = 0.0
        self._tls = tls
        self._sock: _socket.socket | None = None
        self._buffer = b""
        self.in_handshake = False
        """The last failure came in the TLS handshake (the request was not sent)."""
        self.reused = False
        """The last request went out on a connection an earlier one had used (so a close with
        no reply says that the server let it go, nothing of the endpoint)."""

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._buffer = b""

    def idle(self) -> bool:
        """Whether the connection is open and can carry the next request: nothing waits to be
        read on it (an idle HTTP/1.1 connection has nothing to say; the server's close, or
        anything else, is there to read). One that cannot is closed."""
        if self._sock is None or self._buffer:
            self.close()
            return False
        import select  # only a process that keeps connections asks

        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):
            readable = [self._sock]
        if readable:
            self.close()
            return False
        return True

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> Response:
        """Send one request and read its whole reply; closes the connection on any failure."""
        return self._exchange("POST", path, body, headers)

    def get(self, path: str, headers: dict[str, str] | None = None) -> Response:
        """``post``, for a GET (no body): etcd's ``/version``."""
        return self._exchange("GET", path, None, headers or {})

    # -- internals ----------------------------------------------------------------------------

    def _exchange(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> Response:
        self.in_handshake = False
        self.reused = self._sock is not None
        self._deadline = time.monotonic() + self.timeout
        try:
            sock = self._connect()
            head = [f"{method} {path} HTTP/1.1", f"Host: {host_port(self.host, self.port)}"]
            head += [f"{name}: {value}" for name, value in headers.items()]
            if body is not None:
                head.append(f"Content-Length: {len(body)}")
            body = body or b""
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            return self._read_response()
        except (OSError, ValueError) as exc:
            self.close()
            if isinstance(exc, OSError):
                raise
            raise HTTPError(f"malformed HTTP reply: {exc}") from None

    def _connect(self) -> _socket.socket:
        if self._sock is None:
            sock = _connected(self.host, self.port, self.timeout)
            try:
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                if self._tls is not None:  # verifies etcd's certificate, and that it names host
                    import socket

                    plain = socket.socket(sock.family, sock.type, sock.proto, sock.detach())
                    self.in_handshake = True  # a failure now sent nothing of the request
                    sock = self._tls.wrap_socket(plain, server_hostname=self.host)
                    self.in_handshake = False
            except BaseException:
                sock.close()
                raise
            self._sock = sock
        self._sock.settimeout(self._left())
        return self._sock

    def _left(self) -> float:
        """Seconds left of the request's time; ``TimeoutError`` once none is."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left

    def _fill(self, *, first: bool = False) -> None:
        """More of the reply; ``first``: its first bytes, none of which has come yet."""
        assert self._sock is not None
        self._sock.settimeout(self._left())
        data = self._sock.recv(65536)
        if not data and first:
            raise Unanswered("the connection closed without a byte of reply")
        if not data:
            raise HTTPError("the connection closed before the reply was complete")
        self._buffer += data

    def _line(self) -> bytes:
        while b"\r\n" not in self._buffer:
            if len(self._buffer) > MAX_HEADER_BYTES:
                raise HTTPError("reply header too long")
            self._fill()
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line

    def _exactly(self, size: int) -> bytes:
        if size < 0:  # a slice would take all but the last bytes: a body cut short
            raise HTTPError(f"negative length in the reply: {size}")
        while len(self._buffer) < size:
            self._fill()
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _read_response(self) -> Response:
        if not self._buffer:
            self._fill(first=True)
        code = 100
        while 100 <= code < 200:  # 1xx replies are interim, even unasked (RFC 9110 §15.2)
            version, status, *reason = self._line().decode("latin-1").split(" ", 2)
            if not version.startswith("HTTP/1."):
                raise HTTPError(f"not an HTTP/1.x reply: {version!r}")
            code = int(status)
            headers: dict[str, str] = {}
            while line := self._line():
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._chunked()
        else:
            body = self._exactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return Response(code, reason[0] if reason else "", body, headers)

    def _chunked(self) -> bytes:
        parts = []
        while size := int(self._line().split(b";", 1)[0], 16):
            parts.append(self._exactly(size))
            self._exactly(2)  # the CRLF after each chunk
        while self._line():  # trailer fields, then the empty line
            pass
        return b"".join(parts)


def _connected(host: str, port: int, timeout: float) -> _socket.socket:
    """A TCP connection to the first of the host's addresses that answers (as
    ``socket.create_connection`` makes one). The host goes to the resolver as ASCII bytes: a
    ``str`` would load the IDNA codec, for names that are plain ASCII here anyway."""
    name = host.encode("idna") if not host.isascii() else host.encode()
    failure: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
    raise failure
