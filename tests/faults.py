"""Fault injection on loopback: a proxy between the plugin and etcd, and a silent listener.

The proxy reads the HTTP/2 frames gRPC sends (9-byte frame headers; no decoding beyond that).
When a request's DATA frame contains a marker, e.g. the bytes of an event being written, it
forwards the request to etcd, then swallows etcd's answer and cuts the connection: the write is
applied but the plugin never learns it. That is an ambiguous commit, the fault a timeout after
sending produces in production.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA = 0x0
WRITE_MARKER = b'"change":'
"""Only a write carries an event (with its ``change``) in its request."""


def _frames(sock: socket.socket, buffer: bytearray) -> Iterator[tuple[bytes, int, int, bytes]]:
    """(raw frame, type, stream id, payload) as they arrive; stops when the socket closes."""
    while True:
        while len(buffer) >= 9:
            length = int.from_bytes(buffer[0:3], "big")
            if len(buffer) < 9 + length:
                break
            raw = bytes(buffer[: 9 + length])
            del buffer[: 9 + length]
            stream = int.from_bytes(raw[5:9], "big") & 0x7FFFFFFF
            yield raw, raw[3], stream, raw[9:]
        chunk = sock.recv(65536)
        if not chunk:
            return
        buffer.extend(chunk)


class AnswerDroppingProxy:
    """Forwards 127.0.0.1:<port> to etcd; drops the answers to the next ``arm(n)`` writes."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed = 0
        self.faults_injected = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arm(self, count: int = 1) -> None:
        with self._lock:
            self._armed += count

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _take_fault(self) -> bool:
        with self._lock:
            if self._armed <= 0:
                return False
            self._armed -= 1
            self.faults_injected += 1
            return True

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            doomed: set[int] = set()
            threading.Thread(
                target=self._requests, args=(client, server, doomed), daemon=True
            ).start()
            threading.Thread(
                target=self._answers, args=(server, client, doomed), daemon=True
            ).start()

    def _requests(self, client: socket.socket, server: socket.socket, doomed: set[int]) -> None:
        with contextlib.suppress(OSError):
            buffer = bytearray()
            while len(buffer) < len(PREFACE):
                chunk = client.recv(65536)
                if not chunk:
                    return
                buffer.extend(chunk)
            server.sendall(bytes(buffer[: len(PREFACE)]))
            del buffer[: len(PREFACE)]
            for raw, kind, stream, payload in _frames(client, buffer):
                if kind == DATA and WRITE_MARKER in payload and self._take_fault():
                    doomed.add(stream)  # before etcd can answer: the answer will be dropped
                server.sendall(raw)
        _close(client, server)

    def _answers(self, server: socket.socket, client: socket.socket, doomed: set[int]) -> None:
        with contextlib.suppress(OSError):
            for raw, _kind, stream, _payload in _frames(server, bytearray()):
                if stream in doomed:
                    break  # the write was applied; its answer is lost with the connection
                client.sendall(raw)
        _close(client, server)


class SilentListener:
    """Accepts connections and never answers: an etcd that hangs."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._held.append(conn)

    def close(self) -> None:
        self._listener.close()
        for conn in self._held:
            conn.close()


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
