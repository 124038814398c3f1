"""The exporter's HTTP side: ``GET /metrics`` in Prometheus' text format, rendered with
prometheus-client from the status the refresher keeps in memory, so a scrape never waits on
etcd. A view's node series are rendered once, when it is read; a scrape renders only what
changes with time (ages, ``etcd_up``, the counters) and joins the two.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from resource_extend.commands.exporter.listen import Address
from resource_extend.commands.exporter.view import Family, Status, fresh, scrape_families
from resource_extend.ledger.model.errors import PluginError

TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
"""What ``generate_latest`` writes: the text format every Prometheus reads."""

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
App = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _Families:
    """A prometheus-client collector of :class:`Family` values."""

    def __init__(self, families: list[Family]) -> None:
        self._families = families

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            metric: GaugeMetricFamily | CounterMetricFamily
            if family.type == "counter":
                metric = CounterMetricFamily(family.name, family.help, labels=family.labels)
            else:
                metric = GaugeMetricFamily(family.name, family.help, labels=family.labels)
            for labels, value in family.points:
                metric.add_metric(labels, value)
            yield metric


def render(families: list[Family]) -> bytes:
    """``families`` in Prometheus' text format (prometheus-client's ``generate_latest``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


BUILD_INFO = "resource_extend_build_info"
"""1, labelled with the program and its version: which release each exporter runs."""

LANDING = """<!doctype html>
<html><head><meta charset="utf-8"><title>{program} exporter</title></head>
<body><h1>{program} exporter</h1>
<p>{program} {version}: the ledger's metrics for Prometheus are at
<a href="/metrics">/metrics</a>. "{program} exporter --help" lists them.</p>
</body></html>
"""


def build_info(program: str, version: str) -> bytes:
    """The ``resource_extend_build_info`` family, rendered (it never changes)."""
    labels = ("program", "version")
    family = Family(BUILD_INFO, "The program this exporter runs, and its version.", "gauge",
                    labels, [((program, version), 1.0)])  # fmt: skip
    return render([family])


def metrics_app(
    status: Callable[[], Status], prefix: str, stale_after: float, *, program: str, version: str
) -> App:
    """The WSGI app: ``/metrics`` serves ``status()`` (read once a scrape), ``/`` is a page
    saying where to look; anything else is 404."""
    built = build_info(program, version)
    landing = LANDING.format(program=program, version=version).encode()

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b""]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [b"" if method == "HEAD" else landing]
        if path != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"not found: metrics are at /metrics\n"]
        current, now = status(), time.monotonic()
        dynamic = scrape_families(
            current, prefix, now=now, now_wall=time.time(), stale_after=stale_after
        )
        body = built + render(dynamic)
        if fresh(current, now, stale_after):
            body += current.rendered
        headers = [("Content-Type", TEXT_FORMAT), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [b"" if method == "HEAD" else body]

    return app


MAX_WAITING = 128
"""Connections that may wait for their request at once. Past it the oldest waiting is closed:
a scrape sends its request at once, so what waits longest is idle (or hostile), and each
holds a thread and an open file (2,000 of them stopped the exporter at 1,024 open files)."""
IDLE_TIMEOUT = 10.0
"""Seconds a connection may take to send its request, or to read the answer, before it is
closed."""


class _Server(ThreadingMixIn, WSGIServer):
    """One thread a scrape: a slow client never holds up the next, and an idle one is closed
    (:data:`MAX_WAITING`, :data:`IDLE_TIMEOUT`)."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: a burst of connections is not turned away

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: dict[socket.socket, None] = {}
        """Accepted connections whose request has not come yet, oldest first."""
        self._lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            self._waiting[request] = None
            while len(self._waiting) > MAX_WAITING:
                oldest = next(iter(self._waiting))
                del self._waiting[oldest]
                with contextlib.suppress(OSError):  # its thread reads the end and finishes
                    oldest.shutdown(socket.SHUT_RDWR)
        super().process_request(request, client_address)

    def came(self, request: Any) -> None:
        """``request``'s request line has come: it is served, no longer waiting."""
        with self._lock:
            self._waiting.pop(request, None)

    def shutdown_request(self, request: Any) -> None:
        self.came(request)
        super().shutdown_request(request)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    """No access log on stderr (stderr is for failures); idle connections time out."""

    timeout = IDLE_TIMEOUT
    server: _Server

    def parse_request(self) -> bool:
        self.server.came(self.connection)
        return super().parse_request()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def listen(address: Address, app: App) -> WSGIServer:
    """A server bound to ``address`` (not serving yet: ``serve_forever``); a PluginError in
    one line when the address cannot be bound."""
    server_class = _Server6 if ":" in address.host else _Server
    try:
        return make_server(
            address.host, address.port, app, server_class=server_class, handler_class=_Quiet
        )
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PluginError(f"cannot listen on {address.text}: {reason}") from None


def bound(server: WSGIServer, address: Address) -> Address:
    """The address ``server`` listens on (its port, when 0 was asked for)."""
    return Address(address.host, int(server.server_address[1]))
