"""What a process keeps from one call to the next: etcd auth tokens, TLS contexts (gRPC's
channel credentials), idle HTTP connections and gRPC channels, each by what it was made from.

etcd checks a password with bcrypt (about 60 ms of its CPU a time) and the system's CAs take
about 20 ms to load, so a process that makes call after call (a call process of the resident
helper, the exporter) pays them once, not on every call. A key is everything the value was made
from (a token: the endpoint, user, password and TLS files; a context: the bytes of its files),
so a value is never used past a change of them; a token etcd no longer takes
(:func:`token_refused`) is forgotten by the transport that found it out, and asked for afresh,
once. A connection (:class:`Idle`) is taken while a transport uses it and given back when it is
done, so no two transports share one; it is looked at before it is taken (one the server closed
is closed here, and another dialled: that request was never sent).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from resource_extend.ledger.host.endpoints import Endpoint

if TYPE_CHECKING:
    from resource_extend.ledger.etcd.http11 import Connection as HttpConnection
    from resource_extend.ledger.host.config import EtcdConfig

K = TypeVar("K")
V = TypeVar("V")

MAX_KEPT = 64
"""Values of one kind kept at most (a config edited over and over): past that, all are
forgotten."""


class Kept(Generic[K, V]):
    """Values by what they were made from, for the life of the process."""

    def __init__(self) -> None:
        self._values: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        return self._values.get(key)

    def keep(self, key: K, value: V) -> None:
        if len(self._values) >= MAX_KEPT:
            self._values.clear()
        self._values[key] = value

    def forget(self, key: K) -> None:
        self._values.pop(key, None)

    def forget_all(self) -> None:
        """Drop every value without a word (a forked child: what they hold is its parent's)."""
        self._values.clear()


class Connection(Protocol):
    def idle(self) -> bool:
        """Open and silent, so fit for the next request (closed when not)."""
        ...

    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)

MAX_IDLE = 4
"""Idle connections kept at most for one key: as many as a call's parallel readers use."""


class Idle(Generic[K, C]):
    """Connections no transport is using, by what they were made with (endpoint and TLS
    material), for the life of the process: at most ``MAX_IDLE`` a key and ``MAX_KEPT``
    keys (past either, the one given back, or all, are closed)."""

    def __init__(self) -> None:
        self._idle: dict[K, list[C]] = {}

    def take(self, key: K) -> C | None:
        """An idle connection for ``key`` that can carry a request now, or None."""
        idle = self._idle.get(key)
        while idle:
            try:
                connection = idle.pop()
            except IndexError:  # another thread's
                return None
            if connection.idle():
                return connection
        return None

    def give(self, key: K, connection: C) -> None:
        idle = self._idle.get(key)
        if idle is None:
            if len(self._idle) >= MAX_KEPT:
                self.close()
            idle = self._idle.setdefault(key, [])
        if len(idle) >= MAX_IDLE:
            connection.close()
        else:
            idle.append(connection)

    def close(self) -> None:
        for idle in list(self._idle.values()):
            for connection in idle:
                connection.close()
        self._idle.clear()

    def forget(self) -> None:
        """Drop them all without a word on any (a forked child: the sockets are its parent's)."""
        self._idle.clear()


TokenKey = tuple[Endpoint, str, str, str, str, str]
"""An auth token's endpoint, user and password, and the TLS files it was asked for through."""

TOKENS: Kept[TokenKey, str] = Kept()
"""etcd auth tokens, for either transport (a token is etcd's, not the transport's)."""


def token_key(config: EtcdConfig, where: Endpoint) -> TokenKey:
    auth = config.auth
    return where, auth.username, auth.password, config.ca, config.cert, config.key


STALE_TOKEN_SIGNS = (
    "invalid auth token",  # a simple token etcd forgot: restarted, timed out, password set
    "revision of auth store is old",  # etcd 3.4: a token had before any change of users or roles
    "revision in header is old",  # etcd 3.5's words for the same
    "user name is empty",  # a token etcd could read no user from
)
"""What etcd says of a token it no longer takes. A JWT outlives an auth change (``etcdctl
user add`` of anyone) but etcd refuses it after one, with ``invalid_argument``, not
``unauthenticated``."""


def token_refused(code: str, message: str) -> bool:
    """Whether etcd refused the token a request carried, not the request or the user: a new
    token may then be asked for (once; a wrong password fails authenticating, never here).
    The cases etcd's Go client authenticates again on (``shouldRefreshToken``). The request
    itself was not applied: etcd checks the token before it runs anything."""
    return code == "unauthenticated" or any(sign in message for sign in STALE_TOKEN_SIGNS)


ConnectionKey = tuple[Endpoint, object]
"""An HTTP connection's endpoint, and what its TLS context was made of (None: plain)."""

CONNECTIONS: Idle[ConnectionKey, HttpConnection] = Idle()
"""Idle HTTP connections to etcd (the gateway's), for the next call of this process."""

os.register_at_fork(after_in_child=CONNECTIONS.forget)
