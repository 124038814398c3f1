"""Which transport a process's requests take (``etcd.transport``), and why.

``auto``, the default, takes gRPC for a scan over many nodes in a process that serves many
calls, where gRPC's imports (about 150 ms) are paid once and a scan is then much cheaper than
over etcd's JSON gateway: the resident helper and the call processes it forks, the exporter, an
operator's command. Everything else takes HTTP: a request about one node is answered as soon
over the gateway, and a call process forked afresh (the helper forks one whenever none is idle)
opens an HTTP connection in a fraction of what a gRPC channel costs it; and a core call in a
process of its own (``resident: false``, or before the helper is up) pays no import. ``http``
and ``grpc`` force one. Nothing here imports a transport until a warm process asks.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

REINSTALL = "reinstall resource-extend (pip install --force-reinstall resource-extend)"
"""What brings back the gRPC transport's libraries (grpcio, protobuf), which every install has."""

Carried = Literal["http", "grpc"]


class Choice(NamedTuple):
    """The transport a process's calls take, and why (what ``doctor`` and ``footprint`` say)."""

    transport: Carried
    why: str


class _Process:
    serves_many_calls = False


PROCESS = _Process()
"""What this process is: one that makes a single call and exits (a core call run in its own
process), or one that serves many (the resident helper and the call processes it forks, the
exporter, an operator's command): :func:`serves_many_calls`."""


def serves_many_calls() -> None:
    """This process makes many calls: ``etcd.transport: auto`` takes gRPC for its scans. Said
    before its first transport opens (the helper says it before it forks a call process)."""
    PROCESS.serves_many_calls = True


def choose(setting: str, *, many_calls: bool | None = None, scan: bool = False) -> Choice:
    """What ``etcd.transport`` means for a process's requests: those of a process that makes
    one call, or many (None: this one); a scan over many nodes, or not. ``auto`` takes gRPC
    for a scan where its ~150 ms of imports are paid once for many calls, and etcd's JSON
    gateway for the rest."""
    if setting == "http":
        return Choice("http", "etcd.transport: http")
    if setting == "grpc":
        return Choice("grpc", "etcd.transport: grpc")
    if not (PROCESS.serves_many_calls if many_calls is None else many_calls):
        return Choice("http", ALONE)
    if not scan:
        return Choice("http", ONE_NODE)
    missing = _grpc_missing()
    if missing:
        return Choice("http", f"auto: gRPC's libraries do not load ({missing}): {REINSTALL}")
    return Choice("grpc", SCANS)


ALONE = "auto: a call in a process of its own, where gRPC's import would cost more than it saves"
ONE_NODE = (
    "auto: a request about one node, answered as soon over etcd's JSON gateway, with no gRPC "
    "channel to open in a call process forked afresh"
)
SCANS = "auto: a scan over many nodes in a process that serves many calls, where gRPC is faster"


def _grpc_missing() -> str:
    """Why the gRPC transport does not import ("": it does)."""
    try:
        import resource_extend.ledger.etcd.grpc_transport  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or exc} is missing"
    return ""


def described(setting: str, *, resident: bool) -> str:
    """Which transport core's calls take, and why: through the helper (a process that serves
    many calls; a scan over many nodes, and the rest) and in a process of their own
    (``resident: false``, or until the helper is up)."""
    alone = choose(setting, many_calls=False)
    helped = choose(setting, many_calls=True, scan=True)
    if not resident or helped == alone:
        return f"transport {setting}: core's calls over {_named(alone.transport)} ({alone.why})"
    return (
        f"transport {setting}: core's scans over many nodes through the helper over "
        f"{_named(helped.transport)}, the rest over {_named(alone.transport)} ({helped.why}; "
        f"{ONE_NODE.removeprefix('auto: ')}; {ALONE.removeprefix('auto: ')})"
    )


def _named(transport: Carried) -> str:
    return "gRPC" if transport == "grpc" else "HTTP"
