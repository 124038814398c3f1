"""Where etcd is and how to reach it safely: ``etcd.machines`` entries as endpoints.

A URL's scheme decides TLS, so that no missing file ever turns TLS off and sends a password in
clear: ``https://`` always speaks TLS and verifies the server (against the system's CAs, or
``etcd.ca``); ``http://`` never does, and TLS files beside it are an error rather than silently
unused; a bare ``host:port`` speaks TLS when TLS files are set, as etcd's own client does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from resource_extend.ledger.host.files import UnfitFile, read_small_file
from resource_extend.ledger.model.errors import StoreError

if TYPE_CHECKING:
    from ipaddress import IPv6Address

DEFAULT_PORT = 2379
SCHEMES = {"http": False, "https": True}
MAX_TLS_FILE_BYTES = 1024 * 1024
UNVERIFIED = (
    "etcd's TLS certificate failed verification: etcd.ca must name the CA that signed it, and "
    "the URL's host must be one the certificate names"
)


def host_port(host: str, port: int) -> str:
    """``host:port``, as a socket, a gRPC target or a Host header wants it (an IPv6 host in
    brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Endpoint(msgspec.Struct, frozen=True):
    host: str
    port: int
    tls: bool

    @property
    def address(self) -> str:
        """``host:port`` (``host_port``)."""
        return host_port(self.host, self.port)


def parse_endpoint(entry: str, *, tls_files: bool) -> Endpoint:
    """One ``etcd.machines`` entry; ``tls_files``: whether ``etcd.ca``/``cert``/``key`` are set.
    Raises ValueError naming the entry (a config error)."""
    where = f"etcd.machines entry {entry!r}"
    if not entry:
        raise ValueError(f"{where} is empty: write http(s)://host:port")
    if any(char.isspace() or not char.isprintable() for char in entry):
        raise ValueError(f"{where} contains blanks or control characters")
    scheme, separator, rest = entry.partition("://")
    scheme = scheme.lower() if separator else ""
    if separator and scheme not in SCHEMES:
        raise ValueError(f"{where}: the scheme must be http:// or https://")
    host, port = _host_and_port(where, rest if separator else entry)
    if port == 0:
        raise ValueError(f"{where}: port 0 is not a port")
    if scheme == "http" and tls_files:
        raise ValueError(
            f"{where} is plain http:// but etcd.ca/cert/key are set: write https:// to use TLS"
        )
    tls = SCHEMES[scheme] if scheme else tls_files
    return Endpoint(host=host, port=port or DEFAULT_PORT, tls=tls)


def _host_and_port(where: str, authority: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[IPv6]`` or ``[IPv6]:port`` (a trailing ``/`` allowed), the
    host lower-cased. By hand rather than with ``urllib.parse``: its import is a twentieth of
    what a call without the resident helper costs."""
    if "@" in authority:
        raise ValueError(f"{where} must not carry credentials: set etcd.auth")
    text = authority.removesuffix("/")
    if any(char in text for char in "/?#"):
        raise ValueError(f"{where} must be scheme://host:port, with no path")
    if text.startswith("["):
        host, bracket, after = text[1:].partition("]")
        if not bracket or (after and not after.startswith(":")) or _ipv6(host) is None:
            raise ValueError(f"{where} is not a valid URL (a bad [IPv6] address)")
        port = after[1:] if after else ""
    else:
        host, _, port = text.partition(":")
        if ":" in port:
            raise ValueError(f"{where} is not a valid URL (an IPv6 address needs [brackets])")
    if not host:
        raise ValueError(f"{where} names no host")
    if port and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        raise ValueError(f"{where} is not a valid URL (port {port!r} is not 0-65535)")
    return host.lower(), int(port) if port else None


def _ipv6(host: str) -> IPv6Address | None:
    """``host`` as an IPv6 address, if it is one."""
    import ipaddress  # only for an IPv6 host

    try:
        return ipaddress.IPv6Address(host)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``: traffic that never leaves the machine."""
    if host == "localhost":
        return True
    if ":" in host:
        address = _ipv6(host.partition("%")[0])
        return address is not None and address.is_loopback
    octets = host.split(".")
    return (
        len(octets) == 4
        and octets[0] == "127"
        and all(o.isascii() and o.isdigit() and len(o) <= 3 and int(o) <= 255 for o in octets)
    )


REFUSED_CERTIFICATE_SIGNS = (
    "BAD_CERTIFICATE",
    "CERTIFICATE_REQUIRED",
    "CERTIFICATE_EXPIRED",
    "Unwrap failed",  # gRPC's word for TLS 1.3's alert after the handshake
)
"""What ``ssl`` and gRPC say when etcd ended a TLS handshake over the client's certificate."""


def certificate_refused(cert: str, reason: str) -> str:
    """etcd ended the TLS handshake over this client's certificate (``etcd.cert``, maybe
    empty): why, as far as this host can tell, and what to do."""
    if not cert:
        why = (
            "none was given, and this etcd asks every client for one (--client-cert-auth): set "
            "etcd.cert and etcd.key"
        )
    elif expired := _expired(cert):
        why = f"etcd.cert {cert!r} expired on {expired}: renew it"
    else:
        why = (
            f"etcd.cert {cert!r} is not signed by a CA etcd trusts (its --trusted-ca-file), or "
            "is not for client use"
        )
    return f"etcd refused this client's certificate ({reason}): {why}"


def _expired(cert: str) -> str | None:
    """When the certificate in ``cert`` expired, if it has (None if not, or unreadable)."""
    import ssl
    import time

    try:  # CPython's own decoder, as its tests use it: no X.509 library needed for a date
        not_after = ssl._ssl._test_decode_cert(cert)["notAfter"]  # type: ignore[attr-defined]
        seconds = ssl.cert_time_to_seconds(not_after)
    except (AttributeError, OSError, ValueError, KeyError, ssl.SSLError):
        return None
    return not_after if seconds < time.time() else None


def read_tls_file(path: str, setting: str) -> bytes:
    """The content of ``etcd.<setting>``, or a one-line error naming the file."""
    try:
        return read_small_file(path, MAX_TLS_FILE_BYTES)
    except UnfitFile as exc:
        raise StoreError(f"etcd.{setting} file {path!r} {exc}") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise StoreError(f"cannot read etcd.{setting} file {path!r}: {reason}") from None
