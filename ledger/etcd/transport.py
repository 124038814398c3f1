"""Carrying ``ledger.etcd.wire`` requests to etcd: over HTTP/JSON or gRPC.

etcd serves its v3 API twice on the client port: as gRPC, and as JSON over plain HTTP through its
gateway (``POST /v3/kv/range``, ``/v3/kv/txn``). Both give the same semantics: one request is
one etcd operation (``tests/etcd_contract.py`` holds both to it). The HTTP transport needs only
``socket`` (``ledger.etcd.http11``), which keeps a call in a process of its own short (gRPC
costs ~150 ms of imports before it sends a byte); the gRPC transport
(``ledger.etcd.grpc_transport``) is cheaper per request, so a process that serves many calls
takes it (``ledger.etcd.choice``).

A transport sends to the endpoint it is told to and reports failures in two kinds:
:class:`Unavailable` (the request may not have been served, or its answer was lost: try another
member; a write's outcome is then unknown) and :class:`Refused` (etcd answered no).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

import msgspec

from resource_extend.ledger.etcd import http11, kept, wire
from resource_extend.ledger.etcd.kept import Kept, TokenKey, token_key
from resource_extend.ledger.host.endpoints import (
    REFUSED_CERTIFICATE_SIGNS,
    UNVERIFIED,
    certificate_refused,
    read_tls_file,
)
from resource_extend.ledger.model.errors import StoreError

if TYPE_CHECKING:
    import ssl

    from resource_extend.ledger.host.config import EtcdConfig

Reply = TypeVar(
    "Reply",
    wire.RangeResponse,
    wire.TxnResponse,
    wire.StatusResponse,
    wire.AlarmResponse,
    wire.MemberListResponse,
)
Request = (
    wire.TxnRequest
    | wire.RangeRequest
    | wire.StatusRequest
    | wire.AlarmRequest
    | wire.MemberListRequest
)

# gRPC status codes, which etcd's gateway also puts in its error bodies.
GRPC_CODES = (
    *("ok", "cancelled", "unknown", "invalid_argument", "deadline_exceeded", "not_found"),
    *("already_exists", "permission_denied", "resource_exhausted", "failed_precondition"),
    *("aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss"),
    "unauthenticated",
)
TRANSIENT_CODES = {"unavailable", "deadline_exceeded"}


class Unavailable(Exception):
    """The endpoint did not answer (refused, reset, timed out, or said it is unavailable)."""


class Refused(Exception):
    """etcd answered with an error."""


class NotEtcd(Refused):
    """What answered is not etcd's client API: the wrong port (etcd's peer port, another
    server), or TLS on one side only. Said as the likely mistake in ``etcd.machines``."""


class NotEtcdAnswer(NotEtcd):
    """What answered a request that went out is not etcd's answer: an error page, a body that
    is not etcd's JSON (a proxy's, or the wrong server's). etcd may have been handed the
    request all the same: a write's outcome is unknown, to be settled like a lost answer."""


PEER_PORT = 2380
"""etcd's default peer port: a client URL naming it is the commonest wrong endpoint."""

TLS_ONLY_SIGN = b"HTTP request to an HTTPS server"
"""What a TLS-only server (Go's) answers a plain HTTP request with."""

PLAIN_SIGNS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER", "HTTP_REQUEST")
"""The reasons ``ssl`` gives when the other side answers a TLS handshake in plain text."""

TLS_HINT = "if this etcd serves TLS, write https://"
"""Said of a plain request closed unanswered: what etcd's TLS-only port does (and, rarely, an
etcd going down: so it is a hint, and the call fails over)."""

PLAIN_HINT = "if this etcd has no TLS, write http://"
"""Said of a handshake the other side ended unanswered: what a plain etcd does (Go's server
reads the handshake as a bad request and closes), and also, rarely, a busy TLS one: so the
call still fails over to the next endpoint."""


def not_etcd(
    port: int, path: str, status: int, reason: str, body: bytes, *, is_etcd: bool
) -> NotEtcd:
    """The error for an answer that is not etcd's client API, naming the likely mistake;
    ``is_etcd``: the server says it is etcd (its peer port answers ``/version`` too)."""
    answered = f"not an etcd client URL (HTTP {status} {reason} to {path})"
    if TLS_ONLY_SIGN in body:
        return NotEtcdAnswer(f"{answered}: it speaks TLS only: write https://")
    if port == PEER_PORT or is_etcd:
        return NotEtcdAnswer(f"{answered}: is {port} the peer port? etcd clients use 2379")
    return NotEtcdAnswer(
        f"{answered}: is it etcd's client port (2379 unless etcd was told otherwise)?"
    )


class NoSpace(Refused):
    """etcd's NOSPACE alarm is raised: its database reached its quota."""


NO_SPACE_SIGN = "database space exceeded"
"""How etcd says NOSPACE (``etcdserver: mvcc: database space exceeded``), over both APIs."""


def refused(detail: str) -> Refused:
    """The error for an answer etcd refused, NOSPACE told apart."""
    return NoSpace(detail) if NO_SPACE_SIGN in detail else Refused(detail)


class Transport(Protocol):
    def send(
        self,
        endpoint: int,
        request: Request,
        reply: type[Reply],
        timeout: float,
    ) -> Reply:
        """Send one request to ``etcd.machines[endpoint]`` and decode its reply."""

    def drop(self, endpoint: int) -> None:
        """Forget the endpoint's connection: the next request there dials afresh."""

    def close(self) -> None: ...


class _GatewayError(msgspec.Struct):
    code: int = 2
    message: str = ""


class _Token(msgspec.Struct):
    token: str = ""


_contexts: Kept[tuple[bytes | tuple[object, ...], bytes, bytes], ssl.SSLContext] = Kept()
"""TLS contexts by what they were made of: the CA's bytes (or the system CAs' files as they
are now), the client certificate's and key's bytes."""


def _system_cas_files() -> tuple[object, ...]:
    """Where the system's CAs are, and each file's size and time: a context made of them is
    made again once they change."""
    import ssl

    paths = ssl.get_default_verify_paths()
    seen: list[object] = []
    for path in (paths.cafile, paths.capath):
        try:
            stat = os.stat(path) if path else None
        except OSError:
            stat = None
        seen.append((path, stat and (stat.st_size, stat.st_mtime_ns, stat.st_ino)))
    return tuple(seen)


_decoders: dict[type, msgspec.json.Decoder] = {}  # type: ignore[type-arg]
_encoder = msgspec.json.Encoder()


def _decode(raw: bytes, kind: type[Reply]) -> Reply:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind, strict=False)
    return decoder.decode(raw)  # type: ignore[no-any-return]


class HttpTransport:
    """etcd's JSON gateway over HTTP/1.1 keep-alive connections; HTTPS where the endpoint says
    TLS (``ssl`` is imported only then)."""

    PATHS: ClassVar[dict[type, str]] = {
        wire.RangeRequest: "/v3/kv/range",
        wire.TxnRequest: "/v3/kv/txn",
        wire.StatusRequest: "/v3/maintenance/status",
        wire.AlarmRequest: "/v3/maintenance/alarm",
        wire.MemberListRequest: "/v3/cluster/member/list",
    }

    def __init__(self, config: EtcdConfig) -> None:
        self._config = config
        self._endpoints = config.endpoints
        self._connections: dict[int, http11.Connection] = {}
        self._tls: ssl.SSLContext | None = None
        self._tls_made_of: object = None

    def send(
        self,
        endpoint: int,
        request: Request,
        reply: type[Reply],
        timeout: float,
    ) -> Reply:
        path = self.PATHS[type(request)]
        raw = self._post(endpoint, path, _encoder.encode(request), timeout)
        try:
            return _decode(raw, reply)
        except msgspec.DecodeError as exc:  # a 200 of someone else's: a proxy's page, say
            raise NotEtcdAnswer(f"not etcd's answer (HTTP 200 to {path}, but {exc})") from None

    def get(self, endpoint: int, path: str, timeout: float) -> http11.Response:
        """GET ``path`` (etcd's ``/version``, which needs no token) and return the whole reply,
        whatever its status, header fields included (``doctor`` reads the server's ``Date``)."""
        connection = self._connection(endpoint, timeout)
        try:
            return connection.get(path)
        except OSError as exc:
            self.drop(endpoint)
            raise _failure(
                exc, connection, tls=self._endpoints[endpoint].tls, cert=self._config.cert
            ) from None

    def drop(self, endpoint: int) -> None:
        connection = self._connections.pop(endpoint, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        """Done with etcd for this call: the connections go back to the process's idle ones
        (``kept.CONNECTIONS``), for its next call."""
        for endpoint, connection in list(self._connections.items()):
            del self._connections[endpoint]
            kept.CONNECTIONS.give(self._connection_key(endpoint), connection)

    def _connection(self, endpoint: int, timeout: float) -> http11.Connection:
        connection = self._connections.get(endpoint)
        if connection is None:
            where = self._endpoints[endpoint]
            tls = self._tls_context() if where.tls else None
            connection = kept.CONNECTIONS.take(self._connection_key(endpoint))
            if connection is None:
                connection = http11.Connection(where.host, where.port, timeout=timeout, tls=tls)
            self._connections[endpoint] = connection
        connection.timeout = timeout
        return connection

    def _connection_key(self, endpoint: int) -> kept.ConnectionKey:
        where = self._endpoints[endpoint]
        return where, (self._tls_made_of if where.tls else None)

    def _tls_context(self) -> ssl.SSLContext:
        """Verifies the server's certificate and host name, against ``etcd.ca`` or else the
        system's CAs; presents ``etcd.cert``/``key`` when they are set. Made once for the
        files' contents as they are now (``ledger.etcd.kept``)."""
        if self._tls is None:
            settings = self._config
            ca = read_tls_file(settings.ca, "ca") if settings.ca else None
            cert = read_tls_file(settings.cert, "cert") if settings.cert else b""
            key = read_tls_file(settings.key, "key") if settings.cert else b""
            made_of = (ca if ca is not None else _system_cas_files(), cert, key)
            context = _contexts.get(made_of)
            if context is None:
                context = self._new_tls_context(ca)
                _contexts.keep(made_of, context)
            self._tls, self._tls_made_of = context, made_of
        return self._tls

    def _new_tls_context(self, ca: bytes | None) -> ssl.SSLContext:
        import ssl

        settings = self._config
        cadata: str | bytes | None = None  # none: the system's CAs
        if ca is not None:
            cadata = ca.decode("latin-1") if b"-----BEGIN" in ca else ca  # PEM, DER
        try:
            if cadata is not None and not cadata:
                raise ValueError("the file is empty")
            context = ssl.create_default_context(cadata=cadata)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise StoreError(
                f"etcd.ca file {settings.ca!r} holds no usable CA certificate: {exc}"
            ) from None
        if settings.cert:
            try:
                # No password: an encrypted key fails here, never prompts on a tty.
                context.load_cert_chain(settings.cert, settings.key, password="")
            except (OSError, ValueError) as exc:
                raise StoreError(
                    f"etcd.cert {settings.cert!r} and etcd.key {settings.key!r} are not a "
                    f"usable certificate and key: {exc}"
                ) from None
        return context

    def _post(
        self,
        endpoint: int,
        path: str,
        body: bytes,
        timeout: float,
        *,
        authenticated: bool = True,
        fresh_token: bool = False,
    ) -> bytes:
        headers = {"Content-Type": "application/json"}
        if authenticated and self._config.auth.username:
            headers["Authorization"] = self._token(endpoint, timeout)
        connection = self._connection(endpoint, timeout)
        try:
            response = connection.post(path, body, headers)
        except OSError as exc:
            self.drop(endpoint)
            if connection.reused and path in SAFE_TO_REPEAT and _let_go(exc):
                # etcd closed the kept connection as the request went out: asked again, afresh
                return self._post(endpoint, path, body, timeout, fresh_token=fresh_token)
            raise _failure(
                exc, connection, tls=self._endpoints[endpoint].tls, cert=self._config.cert
            ) from None
        raw = response.body
        if response.status == 200:
            return raw
        busy = response.status in (502, 503, 504)  # a proxy's or etcd's, whatever its body
        try:
            error = msgspec.json.decode(raw, type=_GatewayError)
        except msgspec.DecodeError:  # not etcd's gateway: not etcd, or not its client port
            if not busy:
                port, is_etcd = self._endpoints[endpoint].port, self._says_etcd(endpoint, timeout)
                raise not_etcd(
                    port, path, response.status, response.reason, raw, is_etcd=is_etcd
                ) from None
            error = _GatewayError(message=f"HTTP {response.status} {response.reason}")
        code = GRPC_CODES[error.code] if 0 <= error.code < len(GRPC_CODES) else "unknown"
        detail = f"{code}: {error.message}"
        if code in TRANSIENT_CODES or busy:
            self.drop(endpoint)
            raise Unavailable(detail)
        if authenticated and not fresh_token and kept.token_refused(code, error.message):
            kept.TOKENS.forget(self._token_key(endpoint))  # etcd voided it: authenticate once more
            return self._post(endpoint, path, body, timeout, fresh_token=True)
        raise refused(detail)

    def _says_etcd(self, endpoint: int, timeout: float) -> bool:
        """Whether the endpoint answers ``GET /version`` as etcd does (its peer port too)."""
        try:
            reply = self.get(endpoint, "/version", timeout)
        except (Unavailable, NotEtcd):
            return False
        return reply.status == 200 and b'"etcdserver"' in reply.body

    def _token(self, endpoint: int, timeout: float) -> str:
        key = self._token_key(endpoint)
        token = kept.TOKENS.get(key)
        if token is None:
            auth = self._config.auth
            body = _encoder.encode({"name": auth.username, "password": auth.password})
            raw = self._post(endpoint, "/v3/auth/authenticate", body, timeout, authenticated=False)
            token = msgspec.json.decode(raw, type=_Token).token
            kept.TOKENS.keep(key, token)
        return token

    def _token_key(self, endpoint: int) -> TokenKey:
        return token_key(self._config, self._endpoints[endpoint])


SAFE_TO_REPEAT = frozenset(
    ("/v3/kv/range", "/v3/maintenance/status", "/v3/maintenance/alarm", "/v3/cluster/member/list")
)
"""The paths whose requests change nothing: sent again when a kept connection was let go under
them. A transaction may write: it is settled by its op id instead (``ledger.store``)."""


def _let_go(exc: OSError) -> bool:
    """Whether a kept connection was closed under a request before any reply came."""
    return isinstance(exc, (http11.Unanswered, ConnectionResetError, BrokenPipeError))


def _failure(
    exc: OSError, connection: http11.Connection, *, tls: bool, cert: str
) -> Unavailable | NotEtcd:
    """What a failed exchange means: the endpoint did not answer, or it answered a TLS
    handshake in plain text (an https:// URL for a plain etcd: then nothing was sent), or it
    closed a plain request unanswered, as etcd's TLS-only port does (an http:// URL for it:
    said as a hint only, since an etcd going down closes connections so too; never of a
    connection kept from an earlier call, which etcd may close when it likes). A handshake
    closed or reset unanswered gets the hint the other way: a plain server that answers our
    hello and closes while the rest of it is still unread resets the connection, so whether
    the plain answer arrives first is a race."""
    if isinstance(exc, http11.Unanswered) and connection.reused:  # etcd let a kept one go
        return Unavailable(f"unavailable: {exc} (a connection kept from an earlier call)")
    if isinstance(exc, http11.Unanswered) and not tls:
        return Unavailable(f"unavailable: {exc} ({TLS_HINT})")
    reason = str(getattr(exc, "reason", "") or "")
    if tls and any(sign in reason for sign in REFUSED_CERTIFICATE_SIGNS):
        return Unavailable(f"unavailable: {certificate_refused(cert, str(exc))}")
    if connection.in_handshake:
        if any(sign in reason for sign in PLAIN_SIGNS):
            return NotEtcd(
                f"not an etcd client URL over TLS (the handshake got a plain answer: {reason}): "
                "for an etcd without TLS write http://"
            )
        if "UNEXPECTED_EOF" in reason:
            return Unavailable(
                f"unavailable: the TLS handshake was closed unanswered ({reason}): {PLAIN_HINT}"
            )
        if isinstance(exc, ConnectionResetError):
            return Unavailable(f"unavailable: the TLS handshake was reset: {PLAIN_HINT}")
    return Unavailable(_describe_os_error(exc))


def _describe_os_error(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "deadline_exceeded: no answer in time"
    if isinstance(exc, ConnectionRefusedError):
        return "unavailable: connection refused"
    if verify := getattr(exc, "verify_message", None):  # ssl.SSLCertVerificationError
        return f"unavailable: {UNVERIFIED} ({verify})"
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"unavailable: {reason}"
