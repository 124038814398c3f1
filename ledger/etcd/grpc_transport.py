"""The gRPC transport (``etcd.transport: grpc``), on etcd's messages as ``ledger.etcd.protos``
builds them (decoded by protobuf's compiled backend).

Requests are ``ledger.etcd.wire`` structs turned into etcd's protobuf messages; replies come
back the other way (ranges and transactions field by field, the rare rest through their JSON
form), so the store sees the same structs whichever transport carries them. The channels are
made here rather than by ``etcd3.Etcd3Client``, which cannot verify a server without also
presenting a client certificate: as over HTTP, each endpoint's scheme decides TLS, and TLS
always verifies the server.

A process keeps its channels from one call to the next (a call process of the resident helper,
the exporter), by endpoint and TLS material (``CHANNELS``), as the HTTP transport keeps its
connections: a channel is gRPC's, shared safely by the transports of a process, and reconnects
by itself. One that failed a request (``Unavailable``) is forgotten, so the next try, a read's
next pass or a write's settling by op id, goes out on a fresh one and never waits out the old
one's reconnect backoff. A forked child forgets them all: they are its parent's.
"""

from __future__ import annotations

import os

# gRPC's C core logs to stderr (TLS handshake failures, for one), where the plugins write one
# error line or nothing: silent unless whoever runs the ledger asked for its logs (the commands
# do when debugging).
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from typing import Any

import grpc
import grpc._channel  # what the first channel imports: here, once, in a warm helper
import msgspec
from google.protobuf import json_format

from resource_extend.ledger.etcd import kept, protos, wire
from resource_extend.ledger.etcd.kept import Kept, token_key
from resource_extend.ledger.etcd.transport import (
    PLAIN_HINT,
    TLS_HINT,
    Refused,
    Reply,
    Request,
    Unavailable,
    refused,
)
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.host.endpoints import (
    REFUSED_CERTIFICATE_SIGNS,
    UNVERIFIED,
    Endpoint,
    certificate_refused,
    read_tls_file,
)

_TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
_GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    # A channel of its own connections: gRPC otherwise shares a target's connection among a
    # process's channels, so a channel made afresh after one failed would wait out the failed
    # one's reconnect backoff (seen: "Connection refused" from an etcd already back).
    ("grpc.use_local_subchannel_pool", 1),
]
_METHODS: dict[type, tuple[str, str]] = {
    wire.RangeRequest: ("KV", "Range"),
    wire.TxnRequest: ("KV", "Txn"),
    wire.StatusRequest: ("Maintenance", "Status"),
    wire.AlarmRequest: ("Maintenance", "Alarm"),
    wire.MemberListRequest: ("Cluster", "MemberList"),
}
"""The service and method (``/etcdserverpb.KV/Range``) that carries each request."""
for _service, _method in (*_METHODS.values(), ("Auth", "Authenticate")):  # made once, here
    protos.message(f"{_method}Request"), protos.message(f"{_method}Response")
_UNVERIFIED_SIGNS = ("CERTIFICATE_VERIFY_FAILED", "verification check failed")
_PLAIN_SIGNS = ("Handshake read failed", "WRONG_VERSION_NUMBER")
"""gRPC's words for a TLS handshake a plain server answered, or closed, unfinished."""
"""How gRPC's TLS says the server's certificate (or the host name in it) did not verify."""
Metadata = tuple[tuple[str, str], ...]
TlsMaterial = tuple[bytes | None, bytes | None, bytes | None]
"""The CA, key and certificate a channel's credentials are made of."""


ChannelKey = tuple[Endpoint, object]
"""A channel's endpoint, and the TLS material its credentials were made of (None: plain)."""

CHANNELS: Kept[ChannelKey, grpc.Channel] = Kept()
"""gRPC channels to etcd, for the next call of this process."""


def _forget_channels() -> None:
    """In a forked child: the channels kept are its parent's, never to be used here."""
    CHANNELS.forget_all()


os.register_at_fork(after_in_child=_forget_channels)


class _Client:
    """One endpoint's channel (and its key among the kept ones), and the auth token each
    request carries."""

    def __init__(self, channel: grpc.Channel, key: ChannelKey, metadata: Metadata | None) -> None:
        self.channel = channel
        self.key = key
        self.metadata = metadata


class GrpcTransport:
    def __init__(self, config: EtcdConfig) -> None:
        self._config = config
        self._endpoints = config.endpoints
        self._clients: dict[int, _Client] = {}
        self._credentials: grpc.ChannelCredentials | None = None
        self._material: TlsMaterial | None = None

    def send(
        self,
        endpoint: int,
        request: Request,
        reply: type[Reply],
        timeout: float,
    ) -> Reply:
        service, method = _METHODS[type(request)]
        fields = msgspec.to_builtins(request, builtin_types=(bytes,))
        answer = self._ask(
            endpoint, service, method, protos.message(f"{method}Request")(**fields), timeout
        )
        if reply is wire.RangeResponse:
            return _range_reply(answer)  # type: ignore[return-value]
        if reply is wire.TxnResponse:
            return _txn_reply(answer)  # type: ignore[return-value]
        as_json = json_format.MessageToJson(answer, preserving_proto_field_name=True, indent=None)
        return msgspec.json.decode(as_json, type=reply, strict=False)

    def _ask(
        self,
        endpoint: int,
        service: str,
        method: str,
        message: Any,
        timeout: float,
        *,
        fresh: bool = False,
    ) -> Any:
        client = self._client(endpoint, timeout)
        try:
            return protos.method(client.channel, service, method)(
                message, timeout, metadata=client.metadata
            )
        except grpc.RpcError as exc:
            code = exc.code().name.lower()
            if (
                client.metadata is not None
                and not fresh
                and kept.token_refused(code, exc.details() or "")
            ):  # the token kept is one etcd voided: authenticate once more
                kept.TOKENS.forget(token_key(self._config, self._endpoints[endpoint]))
                self.drop(endpoint)
                return self._ask(endpoint, service, method, message, timeout, fresh=True)
            failure = _failure(exc, tls=self._endpoints[endpoint].tls, cert=self._config.cert)
            if isinstance(failure, Unavailable):
                self.drop(endpoint)
            raise failure from None

    def drop(self, endpoint: int) -> None:
        """Forget the endpoint's channel, here and among the kept ones: it failed a request.
        (Not closed: another transport of this process may be using it; it closes when the
        last lets go.)"""
        client = self._clients.pop(endpoint, None)
        if client is not None and CHANNELS.get(client.key) is client.channel:
            CHANNELS.forget(client.key)

    def close(self) -> None:
        """Done with the channels: they stay kept for the process's next call."""
        self._clients.clear()

    def _client(self, endpoint: int, timeout: float) -> _Client:
        client = self._clients.get(endpoint)
        if client is None:
            where = self._endpoints[endpoint]
            key: ChannelKey = (where, self._tls_material() if where.tls else None)
            channel = CHANNELS.get(key)
            if channel is None:
                if where.tls:
                    credentials = self._tls_credentials()
                    channel = grpc.secure_channel(where.address, credentials, options=_GRPC_OPTIONS)
                else:
                    channel = grpc.insecure_channel(where.address, options=_GRPC_OPTIONS)
                CHANNELS.keep(key, channel)
            client = _Client(channel, key, None)
            try:
                client.metadata = self._metadata(endpoint, channel, timeout)
            except grpc.RpcError as exc:
                self._clients[endpoint] = client
                self.drop(endpoint)
                raise _failure(exc, tls=where.tls, cert=self._config.cert) from None
            self._clients[endpoint] = client
        return client

    def _metadata(self, endpoint: int, channel: grpc.Channel, timeout: float) -> Metadata | None:
        """The token to send with each request, when etcd.auth names a user: the one kept
        (``ledger.etcd.kept``), or one had now."""
        if not self._config.auth.username:
            return None
        key = token_key(self._config, self._endpoints[endpoint])
        token = kept.TOKENS.get(key)
        if token is None:
            token = self._authenticate(channel, timeout)
            kept.TOKENS.keep(key, token)
        return (("token", token),)

    def _authenticate(self, channel: grpc.Channel, timeout: float) -> str:
        auth = self._config.auth
        request = protos.message("AuthenticateRequest")(name=auth.username, password=auth.password)
        token: str = protos.method(channel, "Auth", "Authenticate")(request, timeout).token
        return token

    def _tls_material(self) -> TlsMaterial:
        """The CA (``etcd.ca``, else the system's CAs), key and certificate, as their files
        are now: what the credentials are made of, and a kept channel is kept by."""
        if self._material is None:
            settings = self._config
            self._material = (
                read_tls_file(settings.ca, "ca") if settings.ca else _system_cas(),
                read_tls_file(settings.key, "key") if settings.key else None,
                read_tls_file(settings.cert, "cert") if settings.cert else None,
            )
        return self._material

    def _tls_credentials(self) -> grpc.ChannelCredentials:
        """Verify the server against ``etcd.ca``, else the system's CAs; present
        ``etcd.cert``/``key`` when they are set. Made once for the files' contents as they
        are now (``ledger.etcd.kept``), as the HTTP transport's TLS context is."""
        if self._credentials is None:
            made_of = self._tls_material()
            credentials = _credentials.get(made_of)
            if credentials is None:
                root, key, chain = made_of
                credentials = grpc.ssl_channel_credentials(
                    root_certificates=root, private_key=key, certificate_chain=chain
                )
                _credentials.keep(made_of, credentials)
            self._credentials = credentials
        return self._credentials


_credentials: Kept[TlsMaterial, grpc.ChannelCredentials] = Kept()
"""Channel credentials by the bytes they were made of."""


def _range_reply(answer: Any) -> wire.RangeResponse:
    """A ``RangeResponse`` message as the store reads it, field by field (a range of 1,000
    node records through its JSON form took longer than etcd took to send it)."""
    return wire.RangeResponse(
        header=wire.Header(revision=answer.header.revision),
        kvs=[
            wire.KeyValue(
                key=kv.key, value=kv.value, mod_revision=kv.mod_revision, version=kv.version
            )
            for kv in answer.kvs
        ],
        more=answer.more,
        count=answer.count,
    )


def _txn_reply(answer: Any) -> wire.TxnResponse:
    """A ``TxnResponse`` message as the store reads it: its ranges' replies (a put's or a
    delete's reply holds nothing the store reads)."""
    return wire.TxnResponse(
        header=wire.Header(revision=answer.header.revision),
        succeeded=answer.succeeded,
        responses=[
            wire.ResponseOp(
                response_range=_range_reply(op.response_range)
                if op.HasField("response_range")
                else None
            )
            for op in answer.responses
        ],
    )


def _system_cas() -> bytes | None:
    """The system's CA bundle, where ``ssl`` finds it (``$SSL_CERT_FILE`` first); None leaves
    gRPC its own bundled roots."""
    import ssl

    paths = ssl.get_default_verify_paths()
    for path in (paths.cafile, paths.openssl_cafile):
        if path:
            try:
                with open(path, "rb") as file:
                    return file.read()
            except OSError:
                continue
    return None


def _failure(exc: grpc.RpcError, *, tls: bool, cert: str) -> Unavailable | Refused:
    """What a failed call means, with the hints the HTTP transport gives for the same
    mistakes: gRPC's own words name none (``Socket closed`` for ``http://`` to a TLS-only
    etcd, ``Handshake read failed`` for ``https://`` to a plain one)."""
    details = exc.details() or ""
    if any(sign in details for sign in _UNVERIFIED_SIGNS):
        details = f"{UNVERIFIED} ({details})"
    elif exc.code() == grpc.StatusCode.UNAVAILABLE:
        if tls and any(sign in details for sign in REFUSED_CERTIFICATE_SIGNS):
            details = certificate_refused(cert, details)
        elif tls and any(sign in details for sign in _PLAIN_SIGNS):
            details = f"{details}: {PLAIN_HINT}"
        elif not tls and details.endswith("Socket closed"):
            details = f"{details} ({TLS_HINT})"
    detail = f"{exc.code().name.lower()}: {details}"
    return Unavailable(detail) if exc.code() in _TRANSIENT else refused(detail)
