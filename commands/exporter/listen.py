"""Where the exporter serves: ``--listen``, checked before anything starts (a usage error)."""

from __future__ import annotations

import msgspec

from resource_extend.ledger.host.endpoints import host_port
from resource_extend.ledger.model.errors import PluginError

DEFAULT_HOST = "127.0.0.1"
"""Loopback: the metrics reach no other host unless the operator says so."""


class Address(msgspec.Struct, frozen=True):
    host: str
    port: int

    @property
    def text(self) -> str:
        """``host:port``, an IPv6 address in brackets."""
        return host_port(self.host, self.port)

    @property
    def url(self) -> str:
        return f"http://{self.text}/metrics"


def parse_listen(text: str) -> Address:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (every IPv4 address); port 0 picks a free
    one. Otherwise a PluginError saying what is wrong."""
    host, colon, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else host
    why = ""
    if not colon or not port:
        why = "no port"
    elif not (port.isascii() and port.isdigit()):
        why = f"the port {port!r} is not a number"
    elif int(port) > 65535:
        why = f"the port {port} is out of range (0-65535)"
    elif ":" in host and not bracketed:
        why = "an IPv6 address goes in brackets"
    elif not host.isprintable() or any(c in host for c in " /[]"):
        why = f"{host!r} is not a host name or address"
    if why:
        raise PluginError(
            f"--listen {text!r}: {why}; expected HOST:PORT, such as 127.0.0.1:18464, "
            "[::1]:18464, or :18464 for every address"
        )
    return Address(host or "0.0.0.0", int(port))
