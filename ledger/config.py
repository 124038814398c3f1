"""The plugin's configuration: core's ``gpu.yaml`` format, plus optional tuning knobs and the
bounds on event streams.

Looked up in this order: an explicit path (``--config``), ``$ERU_RESOURCE_CONFIG_PATH``,
``gpu.yaml`` in the working directory (core runs plugins from their directory).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from ledger.errors import PluginError

ENV_VAR = "ERU_RESOURCE_CONFIG_PATH"
DEFAULT_FILE = "gpu.yaml"


class Auth(msgspec.Struct, kw_only=True):
    username: str = ""
    password: str = ""


class EtcdConfig(msgspec.Struct, kw_only=True):
    machines: Annotated[list[str], msgspec.Meta(min_length=1)]
    prefix: str = "/eru"
    auth: Auth = msgspec.field(default_factory=Auth)
    ca: str = ""
    cert: str = ""
    key: str = ""
    timeout: Annotated[float, msgspec.Meta(gt=0, le=25)] = 5.0
    """Seconds one call may spend on etcd in all, retries and fail-over included."""
    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 64
    """How many times a write re-reads and retries after losing a compare-and-swap."""
    transport: Literal["http", "grpc"] = "http"
    """How requests reach etcd: its JSON gateway over HTTP (fast to start), or gRPC."""

    @property
    def tls(self) -> bool:
        return bool(self.ca and self.cert and self.key)


class StreamsConfig(msgspec.Struct, kw_only=True):
    """Bounds on event streams (etcd refuses writes past its storage quota)."""

    max_events: Annotated[int, msgspec.Meta(ge=0)] = 0
    """Compact a stream back to this many events (its checkpoint included) once an append takes
    it a tenth over; 0 leaves streams unbounded (compact them with ``resource-gpu compact``)."""
    export_dir: str = ""
    """Where compaction writes the events it removes, as JSON lines, before deleting them."""
    min_age: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    """Seconds an event stays in etcd before compaction may remove it. A call whose answer was
    lost settles its write by finding its operation id among the recent events, so they must
    outlive every call that can still ask (core kills a call after 30 s; the rest is margin
    for clocks that disagree between hosts)."""

    def __post_init__(self) -> None:
        if self.max_events == 1:
            raise ValueError("streams.max_events must be 0 (unbounded) or at least 2")
        if self.max_events and not self.export_dir:
            raise ValueError(
                "streams.max_events needs streams.export_dir (where removed events go)"
            )

    @property
    def compact_over(self) -> int:
        """The stream length past which an append triggers compaction (0: never)."""
        return self.max_events + max(self.max_events // 10, 1) if self.max_events else 0


class Config(msgspec.Struct, kw_only=True):
    etcd: EtcdConfig
    streams: StreamsConfig = msgspec.field(default_factory=StreamsConfig)
    resident: bool = True
    """Serve core's calls from a warm resident helper (``commands.residentd``)."""


_loaded: dict[Path, tuple[tuple[int, int, int], Config]] = {}
"""Configs already parsed, by path, with the file's (inode, size, mtime) when parsed: the
resident helper reads a file again only when it has changed."""


def config_path(explicit: str | None) -> Path:
    return Path(explicit or os.environ.get(ENV_VAR) or DEFAULT_FILE)


def load(explicit: str | None = None) -> Config:
    path = config_path(explicit)
    try:
        stat = path.stat()
        version = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if (cached := _loaded.get(path)) is not None and cached[0] == version:
            return cached[1]
        text = path.read_text()
    except FileNotFoundError:
        raise PluginError(
            f"config file {str(path)!r} not found (pass --config or set {ENV_VAR})"
        ) from None
    except OSError as exc:
        raise PluginError(f"cannot read config file {str(path)!r}: {exc.strerror}") from None
    config = parse(text, source=str(path))
    _loaded[path] = (version, config)
    return config


def parse(text: str, *, source: str = "config") -> Config:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        raw = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        reason = str(exc).replace("\n", " ")
        raise PluginError(f"config {source!r} is not valid YAML: {reason}") from None
    try:
        return msgspec.convert(raw, Config)
    except msgspec.ValidationError as exc:
        raise PluginError(f"config {source!r}: {exc}") from None
