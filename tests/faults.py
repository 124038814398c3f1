"""Fault injection on loopback: a proxy between the plugin and etcd, and a silent listener.

The proxy speaks just enough of both transports to tell a write from a read: the HTTP/2 frames
gRPC sends (9-byte frame headers; no decoding beyond that), and the HTTP/1.1 requests of the
JSON gateway (a request line, headers, a Content-Length body). When a write passes (a DATA frame
holding an event, or a ``/v3/kv/txn`` that puts keys) it forwards it to etcd, then swallows
etcd's answer and cuts the connection: the write is applied but the plugin never learns it.
That is an ambiguous commit, the fault a timeout after sending produces in production.

Which writes lose their answer: the next ``arm(n)`` ones, then, after ``drop_at_random``, each
further write with that probability, drawn from a seeded generator so a run can be replayed.
``writes_seen`` and ``faults_injected`` count what happened.

``crash_on_next_write(kill)`` times a crash to a write: the proxy forwards the write and runs
``kill`` at once (etcd dies with the write in its socket: applied or not, nobody knows) or, with
``at_answer``, when etcd's answer comes (etcd has processed the write: committed it, if its
compare held, and the plugin never hears so). The answer never reaches the plugin, whose
connection stays open until etcd's end closes: its retry meets a dead etcd. While etcd is down
the proxy accepts connections and closes them at once, as a dead etcd behind a load balancer
would.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA = 0x0
HEADERS = 0x1
RST_STREAM = 0x3
END_STREAM = 0x1
WRITE_MARKER = b'"change":'
"""Over gRPC only a write carries an event (with its ``change``) in its request."""
HTTP1_WRITE = (b"/v3/kv/txn", b'"request_put"')
"""Over HTTP a write is a transaction that puts keys (events are base64 in the JSON)."""
HTTP1_STREAM = 1
"""HTTP/1.1 answers in request order, so one key stands for "the request now in flight"."""


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
    """Forwards 127.0.0.1:<port> to etcd; drops the answers to the next ``arm(n)`` writes, and
    to each other write with the probability ``drop_at_random`` sets."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._held: dict[tuple[int, int], list[bytes]] = {}
        """Frames of a muted write's stream that came before its answer (HTTP/2)."""
        self._armed = 0
        self._drop_fraction = 0.0
        self._random = random.Random(0)
        self.writes_seen = 0
        """Requests that carried an event (forwarded to etcd, answered or not)."""
        self.faults_injected = 0
        """Writes whose answer was dropped (``arm`` and ``drop_at_random``)."""
        self._crash: tuple[Callable[[], None], bool] | None = None
        self._crash_skip = 0
        self._cut_after_crash = False
        self.crashed = threading.Event()
        """Set once ``crash_on_next_write``'s crash has run."""
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arm(self, count: int = 1) -> None:
        with self._lock:
            self._armed += count

    def drop_at_random(self, fraction: float, seed: int) -> None:
        """From now on drop the answer to each write with probability ``fraction``, drawn from
        ``random.Random(seed)``: the n-th write from here meets the same fate on every run."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"{fraction} is not a probability")
        with self._lock:
            self._drop_fraction = fraction
            self._random = random.Random(seed)

    def crash_on_next_write(
        self,
        crash: Callable[[], None],
        *,
        at_answer: bool = False,
        skip: int = 0,
        then_cut: bool = False,
    ) -> None:
        """At the next write (after ``skip`` more): forward it, then run ``crash`` (which should
        kill etcd, or the client) at once, or when etcd answers it (``at_answer``); either way
        the answer is dropped. ``then_cut``: once ``crash`` has returned, the connection is
        cut, so the client learns of its lost answer then, however long ``crash`` took (not
        when its own time runs out)."""
        with self._lock:
            self._crash = (crash, at_answer)
            self._crash_skip = skip
            self._cut_after_crash = then_cut

    def close(self) -> None:
        self._closed = True
        _close(self._listener)  # shut down first: that also ends the accept() blocked on it

    def _fate(self) -> tuple[bool, tuple[Callable[[], None], bool] | None]:
        """For the write now passing (called once per write): drop its answer? and the crash to
        run with it (and whether at its answer)."""
        with self._lock:
            self.writes_seen += 1
            if self._crash is not None and self._crash_skip > 0:
                self._crash_skip -= 1
            elif self._crash is not None:
                crash, self._crash = self._crash, None
                return False, crash
            return self._take_fault(), None

    def _rearm(self, crash: Callable[[], None] | None) -> None:
        with self._lock:
            if crash is not None and self._crash is None:
                self._crash, self._crash_skip = (crash, True), 0

    def _run_crash(self, crash: Callable[[], None]) -> None:
        crash()
        self.crashed.set()

    def _take_fault(self) -> bool:
        """Whether to drop the answer to this write (with the lock held)."""
        if self._armed > 0:
            self._armed -= 1
        elif not (self._drop_fraction and self._random.random() < self._drop_fraction):
            return False
        self.faults_injected += 1
        return True

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._upstream)
            except OSError:  # etcd is down: the plugin sees its connection closed
                _close(client)
                continue
            threading.Thread(target=self._serve, args=(client, server), daemon=True).start()

    def _serve(self, client: socket.socket, server: socket.socket) -> None:
        """One connection: which protocol it speaks, then a thread each way."""
        buffer = bytearray()
        with contextlib.suppress(OSError):
            while len(buffer) < 4:
                chunk = client.recv(65536)
                if not chunk:
                    break
                buffer.extend(chunk)
        if len(buffer) < 4:
            _close(client, server)
            return
        doomed: set[int] = set()
        muted: dict[int, Callable[[], None] | None] = {}
        http2 = buffer.startswith(PREFACE[:4])
        requests, answers = (
            (self._requests, self._answers)
            if http2
            else (self._http1_requests, self._http1_answers)
        )
        threading.Thread(target=answers, args=(server, client, doomed, muted), daemon=True).start()
        requests(client, server, doomed, muted, buffer)

    def _requests(
        self,
        client: socket.socket,
        server: socket.socket,
        doomed: set[int],
        muted: dict[int, Callable[[], None] | None],
        buffer: bytearray,
    ) -> None:
        """Client to etcd. ``doomed``: streams whose answer cuts the connection; ``muted``:
        streams whose answer is swallowed, with the crash to run when it comes (if any)."""
        with contextlib.suppress(OSError):
            while len(buffer) < len(PREFACE):
                chunk = client.recv(65536)
                if not chunk:
                    break
                buffer.extend(chunk)
            else:
                server.sendall(bytes(buffer[: len(PREFACE)]))
                del buffer[: len(PREFACE)]
                for raw, kind, stream, payload in _frames(client, buffer):
                    write = kind == DATA and WRITE_MARKER in payload
                    self._forward(server, raw, stream, write, doomed, muted)
        _close(client, server)

    def _forward(
        self,
        server: socket.socket,
        raw: bytes,
        stream: int,
        write: bool,
        doomed: set[int],
        muted: dict[int, Callable[[], None] | None],
    ) -> None:
        """Send one request (or frame) on to etcd; for a write, decide first what becomes of
        its answer, so the mark is in place before etcd can answer."""
        drop, crash = self._fate() if write else (False, None)
        if drop:
            doomed.add(stream)
        if crash is not None:
            muted[stream] = crash[0] if crash[1] else None
        server.sendall(raw)
        if crash is not None and not crash[1]:
            self._run_crash(crash[0])

    def _pass_answer(
        self,
        client: socket.socket,
        raw: bytes,
        stream: int,
        doomed: set[int],
        muted: dict[int, Callable[[], None] | None],
        *,
        answer: bool = True,
        ends: bool = False,
    ) -> bool:
        """Send one answer (or frame) on to the plugin, unless its write's answer is to be
        lost; False once the connection is to be cut. Over HTTP/2 only a DATA frame is the
        write's answer (``answer``): the frames before it are held back, and a stream that
        ``ends`` without one (its deadline passed, an error) gets them all and hands the crash
        to the next write, since etcd may never have applied this one."""
        if stream in doomed:
            return False  # the write was applied; its answer is lost with the connection
        held = (id(muted), stream)  # stream ids are per connection, as ``muted`` is
        if stream in muted and not answer and muted[stream] is not None:
            self._held.setdefault(held, []).append(raw)
            if ends:
                self._rearm(muted.pop(stream))
                client.sendall(b"".join(self._held.pop(held)))
            return True
        if stream in muted:
            self._held.pop(held, None)
            crash, muted[stream] = muted[stream], None
            if crash is not None:
                self._run_crash(crash)
                return not self._cut_after_crash
            return True  # etcd is dead or dying: the connection closes when it is gone
        client.sendall(raw)
        return True

    def _answers(
        self,
        server: socket.socket,
        client: socket.socket,
        doomed: set[int],
        muted: dict[int, Callable[[], None] | None],
    ) -> None:
        with contextlib.suppress(OSError):
            for raw, kind, stream, _payload in _frames(server, bytearray()):
                ends = kind == RST_STREAM or (kind == HEADERS and bool(raw[4] & END_STREAM))
                passed = self._pass_answer(
                    client, raw, stream, doomed, muted, answer=kind == DATA, ends=ends
                )
                if not passed:
                    break
        _close(client, server)

    def _http1_requests(
        self,
        client: socket.socket,
        server: socket.socket,
        doomed: set[int],
        muted: dict[int, Callable[[], None] | None],
        buffer: bytearray,
    ) -> None:
        """Client to etcd over HTTP/1.1: whole requests, one at a time."""
        with contextlib.suppress(OSError):
            while (request := _http1_request(client, buffer)) is not None:
                write = all(marker in request for marker in HTTP1_WRITE)
                self._forward(server, request, HTTP1_STREAM, write, doomed, muted)
        _close(client, server)

    def _http1_answers(
        self,
        server: socket.socket,
        client: socket.socket,
        doomed: set[int],
        muted: dict[int, Callable[[], None] | None],
    ) -> None:
        """etcd to client over HTTP/1.1: the plugin sends its next request only once it has
        the whole answer to the last, so whatever arrives answers the request in flight."""
        with contextlib.suppress(OSError):
            while chunk := server.recv(65536):
                if not self._pass_answer(client, chunk, HTTP1_STREAM, doomed, muted):
                    break
        _close(client, server)


def _http1_request(sock: socket.socket, buffer: bytearray) -> bytes | None:
    """The next whole request (head and Content-Length body), or None once the client closes."""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer.extend(chunk)
    head = bytes(buffer[: end + 4])
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(buffer) < end + 4 + length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer.extend(chunk)
    request = bytes(buffer[: end + 4 + length])
    del buffer[: end + 4 + length]
    return request


class SlowLink:
    """Forwards 127.0.0.1:<port> to etcd; the next ``slow_down(n)`` connections get etcd's
    answers ``delay`` seconds late: a real read that takes that long, over a slow network path,
    while connections after them are served at once. ``slow_down`` cuts the connections open
    till then (a process keeps its connections from call to call): the next request dials
    one, and takes the slow path."""

    def __init__(self, upstream: str, delay: float) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self._upstream = (host, int(port))
        self._delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._slow = 0
        self._open: list[socket.socket] = []
        self.connections = 0
        """Connections accepted since ``slow_down``."""
        self.slowed = threading.Event()
        """Set once a slowed connection sent its first request."""
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def slow_down(self, count: int = 1) -> None:
        self._slow, self.connections = count, 0
        self.slowed.clear()
        cut, self._open = self._open, []
        for client in cut:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        _close(self._listener)

    def _accept(self) -> None:
        for client in _accepted(self._listener):
            self.connections += 1
            self._open.append(client)
            slow, self._slow = self._slow > 0, max(self._slow - 1, 0)
            server = socket.create_connection(self._upstream)
            threading.Thread(target=self._pipe, args=(client, server, 0.0), daemon=True).start()
            late = self._delay if slow else 0.0
            threading.Thread(target=self._pipe, args=(server, client, late), daemon=True).start()
            if slow:
                self.slowed.set()

    def _pipe(self, source: socket.socket, sink: socket.socket, late: float) -> None:
        """Bytes from ``source`` to ``sink``, the first of them ``late`` seconds late."""
        try:
            while chunk := source.recv(65536):
                time.sleep(late)
                late = 0.0
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(source, sink)


_EMPTY_RANGE = b'{"header":{"revision":"1"},"count":"0"}'


class LetsGoSecondRequests:
    """A server that answers each connection's first request as etcd answers a range of
    nothing, and closes the connection, unanswered, as its second comes in: etcd letting a
    kept connection go just as the request went out (a race real etcd cannot be made to
    hit). ``requests``: those that came in, answered or not."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        for conn in _accepted(self.listener):
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            for n in range(2):
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests += 1
                if n == 1:
                    return  # closed under the second request, unanswered
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(_EMPTY_RANGE)}\r\n\r\n".encode()
                    + _EMPTY_RANGE
                )

    def close(self) -> None:
        self.listener.close()


class _ConnectionServer:
    """A server on a free loopback port that hands each connection to :meth:`_serve`, in a
    thread of its own, until :meth:`close`."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        for conn in _accepted(self._listener):
            threading.Thread(target=self._served, args=(conn,), daemon=True).start()

    def _served(self, conn: socket.socket) -> None:
        try:
            self._serve(conn)
        except OSError:
            pass
        finally:
            _close(conn)

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._closed = True
        _close(self._listener)


class SilentListener(_ConnectionServer):
    """Accepts connections and never answers: an etcd that hangs. Each is held open until
    :meth:`close`."""

    def __init__(self) -> None:
        self._done = threading.Event()
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        self._done.wait()

    def close(self) -> None:
        super().close()
        self._done.set()


class RewritingProxy(_ConnectionServer):
    """An HTTP/1.1 proxy in front of etcd's gateway that forwards every request, and replaces
    etcd's answer to each write (a txn that puts) with ``answer``, raw bytes: a proxy's error
    page, or a 200 whose body is not JSON. etcd has applied the write all the same."""

    def __init__(self, upstream: str, answer: bytes) -> None:
        host, port = upstream.removeprefix("http://").rsplit(":", 1)
        self._upstream = (host, int(port))
        self._answer = answer
        self.rewritten = 0
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        import http.client

        buffer = bytearray()
        while (request := _http1_request(conn, buffer)) is not None:
            head, _, body = request.partition(b"\r\n\r\n")
            method, path = head.split(b" ", 2)[:2]
            upstream = http.client.HTTPConnection(*self._upstream, timeout=10)
            upstream.request(method.decode(), path.decode(), body, {"Content-Type":
                             "application/json"})  # fmt: skip
            reply = upstream.getresponse()
            answer = reply.read()
            upstream.close()
            if path == b"/v3/kv/txn" and b"request_put" in body:
                self.rewritten += 1
                conn.sendall(self._answer)
                continue
            conn.sendall(
                f"HTTP/1.1 {reply.status} {reply.reason}\r\nContent-Type: application/json"
                f"\r\nContent-Length: {len(answer)}\r\n\r\n".encode()
                + answer
            )


class TricklingServer(_ConnectionServer):
    """Answers every request as an HTTP/1.1 server sending a long reply one byte at a time,
    ``every`` seconds apart, for as long as the client reads: an etcd behind a path that
    crawls. Each read gets its byte in time; only the request as a whole can run out."""

    def __init__(self, every: float = 0.2) -> None:
        self._every = every
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n"
        conn.recv(65536)  # the request (whatever it is)
        for byte in itertools.chain(head, itertools.repeat(ord(" "))):
            if self._closed:
                return
            conn.sendall(bytes((byte,)))
            time.sleep(self._every)


def _accepted(listener: socket.socket) -> Iterator[socket.socket]:
    """Each connection ``listener`` accepts, till it is closed."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        yield conn


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
