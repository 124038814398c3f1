"""The plugin's configuration: core's format for a plugin's ``<kind>.yaml``, plus optional
tuning knobs and the bounds on event streams.

Looked up in this order: an explicit path (``--config``), ``$ERU_RESOURCE_CONFIG_PATH``, the
program's own file (``Plugin.config_file``, ``gpu.yaml``) in the working directory (core runs
plugins from their directory). Relative paths in it are relative to the file itself, made
absolute as it loads: the same file means the same files from core's directory, from another,
or from the resident helper's ``/``.
"""

from __future__ import annotations

import functools
import os
from typing import Annotated, Literal, Protocol

import msgspec

from resource_extend.ledger.host.endpoints import Endpoint, is_loopback, parse_endpoint
from resource_extend.ledger.host.files import UnfitFile, read_small_file
from resource_extend.ledger.model.errors import PluginError

ENV_VAR = "ERU_RESOURCE_CONFIG_PATH"
MAX_CONFIG_BYTES = 1024 * 1024
"""A plugin's config is a few hundred bytes: a file past this is not one (or not the right
one)."""


class Auth(msgspec.Struct, kw_only=True):
    username: str = ""
    password: str = ""
    allow_plain_http: bool = False
    """Send the credentials over plain HTTP to a host that is not this one: in clear."""


class EtcdConfig(msgspec.Struct, kw_only=True):
    machines: Annotated[list[str], msgspec.Meta(min_length=1)]
    prefix: str = "/eru"
    auth: Auth = msgspec.field(default_factory=Auth)
    ca: str = ""
    cert: str = ""
    key: str = ""
    timeout: Annotated[float, msgspec.Meta(gt=0, le=25)] = 5.0
    """Seconds one call may spend on etcd in all, retries and fail-over included."""
    max_attempts: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 0
    """How many times a write may try its compare-and-swap before it gives up with
    "contention" (0: as often as ``timeout`` allows, each retry after a jittered pause)."""
    transport: Literal["auto", "http", "grpc"] = "auto"
    """How requests reach etcd: gRPC, or its JSON gateway over HTTP (quick to start); ``auto``
    takes gRPC for scans over many nodes in a process that serves many calls, and HTTP for
    the rest and in a process that makes a single call (``ledger.etcd.choice.choose``)."""

    def __post_init__(self) -> None:
        if bool(self.cert) != bool(self.key):
            raise ValueError(
                "etcd.cert and etcd.key go together: set both (a client certificate) or neither"
            )
        endpoints = self.endpoints
        if self.auth.username and not self.auth.allow_plain_http:
            for entry, endpoint in zip(self.machines, endpoints, strict=True):
                if not endpoint.tls and not is_loopback(endpoint.host):
                    raise ValueError(
                        f"etcd.machines entry {entry!r} would send etcd.auth's password in "
                        "clear: write https:// (or set etcd.auth.allow_plain_http: true)"
                    )

    @property
    def endpoints(self) -> list[Endpoint]:
        """One per ``machines`` entry, in order, each knowing whether it speaks TLS: parsed
        once for the process (the config's checks, the connection and the transport all ask)."""
        tls_files = bool(self.ca or self.cert or self.key)
        return list(_parsed(tuple(self.machines), tls_files))


@functools.lru_cache(maxsize=64)
def _parsed(machines: tuple[str, ...], tls_files: bool) -> tuple[Endpoint, ...]:
    return tuple(parse_endpoint(entry, tls_files=tls_files) for entry in machines)


class Destination(msgspec.Struct, frozen=True):
    """Where a compaction writes the events it removes."""

    directory: str
    archive: bool = False
    """It is the archive: checkpoints name its files ``archive:<file>``, not ``host:path``."""
    create: bool = False
    """Made if missing (the local fallback only: an archive, or a directory named by hand,
    must exist, so that a typo fails)."""


class StreamsConfig(msgspec.Struct, kw_only=True):
    """Bounds on event streams: etcd refuses every write, core's included, past its storage
    quota, so the plugin keeps its share of etcd under ``budget`` with no setting required
    (``ledger.upkeep.bounds`` derives each stream's bound from it)."""

    budget: Annotated[int, msgspec.Meta(ge=0)] = 64 * 1024 * 1024
    """Bytes this kind's streams may hold in etcd, all nodes together (0: no total bound).
    Each node's share is the budget over the node count, at ``ledger.upkeep.bounds.EVENT_BYTES`` an
    event; a stream is compacted back to its share once it is a tenth over."""
    max_events: Annotated[int, msgspec.Meta(ge=0)] = 1000
    """The most events one stream keeps, however few the nodes (0: no per-node bound)."""
    archive_dir: str = ""
    """The archive: where compaction writes the events it removes, named in checkpoints
    relative to it (``archive:<file>``), so one directory holds every node's history wherever
    it is read. Set it where ``resource-gpu archive`` runs, and on a core host only if this
    very directory is shared with it."""
    export_dir: str = "~/.local/state/resource-extend/exports"
    """Where a core call compacts to when ``archive_dir`` is not set on its host (the
    archiver was not keeping up): a local fallback, named ``host:path`` in checkpoints."""
    min_age: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    """Seconds an event stays in etcd before compaction may remove it. A call whose answer was
    lost settles its write by finding its operation id among the recent events, so they must
    outlive every call that can still ask (core kills a call after 30 s; the rest is margin
    for clocks that disagree between hosts)."""

    def __post_init__(self) -> None:
        if self.max_events == 1:
            raise ValueError("streams.max_events must be 0 (no per-node bound) or at least 2")
        if (self.max_events or self.budget) and not (self.archive_dir or self.export_dir):
            raise ValueError(
                "bounded streams need streams.archive_dir or streams.export_dir (where "
                "removed events go); set streams.budget and streams.max_events to 0 to keep "
                "every event in etcd"
            )

    @property
    def bounded(self) -> bool:
        return bool(self.max_events or self.budget)

    @property
    def destination(self) -> Destination:
        """Where this host's compactions write: the archive if set here, else the fallback."""
        if self.archive_dir:
            return Destination(self.archive_dir, archive=True)
        return Destination(self.export_dir, create=True)


class SchedulerConfig(msgspec.Struct, kw_only=True):
    max_deploy_count: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 10_000
    """resource-storage: the most plans one placement enumerates (core's default, 10000)."""


MAX_PRODUCT_LENGTH = 256
"""As long as a product in a card map may be (``projections.gpu.resources``)."""


class Config(msgspec.Struct, kw_only=True):
    etcd: EtcdConfig
    streams: StreamsConfig = msgspec.field(default_factory=StreamsConfig)
    scheduler: SchedulerConfig = msgspec.field(default_factory=SchedulerConfig)
    resident: bool = True
    """Serve core's calls from a warm resident helper (``commands.resident.daemon``)."""
    products: dict[str, Annotated[str, msgspec.Meta(max_length=MAX_PRODUCT_LENGTH)]] = (
        msgspec.field(default_factory=dict)
    )
    """resource-gpu detect: a card's name as the driver reports it -> its product."""
    unrecognised: list[str] = msgspec.field(default_factory=list)
    """Top-level keys neither this plugin's nor core's, far from any of ours: ignored (a file
    shared with a newer core may hold them), and reported by doctor (``stray_keys``)."""

    def __post_init__(self) -> None:
        for name, product in self.products.items():
            if not name.strip():
                raise ValueError("products: a reported card name is blank")
            if not product.strip() or not product.isprintable():
                raise ValueError(
                    f"products: {name!r} maps to {product!r}, which is not a product name "
                    "(blank, or with control characters)"
                )


SECTIONS: dict[str, type[msgspec.Struct]] = {
    "": Config,
    "etcd": EtcdConfig,
    "etcd.auth": Auth,
    "streams": StreamsConfig,
    "scheduler": SchedulerConfig,
}
"""The sections whose keys are checked, by dotted path (``""``: the top level)."""

CORE_TOP_LEVEL = frozenset({
    "log_level", "bind", "statsd", "profile", "lock_timeout", "global_timeout",
    "connection_timeout", "ha_keepalive_interval", "cert_path", "max_concurrency", "store",
    "resource_plugins_dir", "resource_plugins_timeout", "resource_plugin", "auth", "grpc",
    "wal_file", "wal_open_timeout", "git", "redis", "docker", "virt", "systemd", "sentry_dsn",
    "log", "probe_target",
})  # fmt: skip

CORE_KEYS: dict[str, frozenset[str]] = {
    "": CORE_TOP_LEVEL,
    "etcd": frozenset({"lock_prefix"}),
    "scheduler": frozenset({"maxshare", "sharebase"}),
}
"""Keys of eru core's own config (``types.Config``), which the upstream plugins read from a
file shared with core: accepted here, and not used."""

NEAR = 0.75
"""How alike (``difflib``'s ratio) a top-level key must be to one of ours to be taken for its
typo, and refused."""


def stray_keys(raw: object) -> tuple[list[str], list[str]]:
    """The keys in a parsed config file that are neither this plugin's nor core's: those
    refused (``"etcd.timeot (did you mean etcd.timeout?)"``: any in a section of ours, or a
    top-level one that looks like a typo of ours) and those only noted (other top-level ones:
    a newer core's, perhaps). Pure: what ``parse`` and doctor judge a file by."""
    refused: list[str] = []
    noted: list[str] = []
    for section, struct in SECTIONS.items():
        found: object = raw
        for part in filter(None, section.split(".")):
            found = found.get(part) if isinstance(found, dict) else None
        if not isinstance(found, dict):
            continue  # absent, or the wrong type: msgspec says so
        ours = [field.encode_name for field in msgspec.structs.fields(struct)]
        ours = [name for name in ours if name != "unrecognised"]
        known = {*ours, *CORE_KEYS.get(section, ())}
        dotted = f"{section}." if section else ""
        for key in found:
            if not isinstance(key, str) or key in known:
                continue
            import difflib  # only for a stray key: most calls never need it

            close = difflib.get_close_matches(key, ours, n=1, cutoff=0.6 if section else NEAR)
            if close:
                refused.append(f"{dotted}{key} (did you mean {dotted}{close[0]}?)")
            elif section:
                refused.append(f"{dotted}{key}")
            else:
                noted.append(key)
    return refused, noted


_loaded: dict[str, tuple[bytes, str, Config]] = {}
"""The config last parsed from each path, with the bytes and the directory it came from. The
resident helper loads the config on every call: reading it again is cheap, parsing it is not.
By content, not (inode, size, mtime): an edit that keeps those is an edit all the same."""


class ParsedCopies(Protocol):
    """A private place to keep what config files parsed to, by path. A process that starts for
    one call then need not import PyYAML, which costs about what msgspec does: 16-18 % of a
    ``resident: false`` read (``ledger.host.copies``, where it is measured)."""

    def get(self, path: str) -> bytes | None: ...

    def put(self, path: str, copy: bytes) -> None: ...

    def drop(self, path: str) -> None: ...


class _Copy(msgspec.Struct):
    """A parsed copy: the config, the digest of the text it was parsed from (not the text,
    which may hold what the config leaves out of a copy) and the directory it was in."""

    digest: str
    base: str
    config: msgspec.Raw


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def config_path(explicit: str | None, default: str | None = None) -> str:
    """``--config``, else ``$ERU_RESOURCE_CONFIG_PATH``, else ``default``, the program's own
    file (``gpu.yaml``) in the working directory; a PluginError when none is given."""
    path = explicit or os.environ.get(ENV_VAR) or default
    if not path:
        raise PluginError(f"no config file named: give --config or ${ENV_VAR}")
    return path


def load(
    explicit: str | None = None,
    *,
    copies: ParsedCopies | None = None,
    default: str | None = None,
) -> Config:
    """The config in force, or a PluginError that says what is wrong with the file, in one
    line: nothing else escapes, whatever the file holds or is.

    ``copies``: where to look for this file's parsed copy (taken only if it was parsed from
    this very text, in this very directory), and to leave one when the config turns the
    resident helper off (with the helper on, calls run in-process only until it is up).
    """
    path = config_path(explicit, default)
    data = _read(path, explicit)
    try:
        base = os.path.dirname(os.path.abspath(path))
    except OSError:  # a relative path, and the working directory is gone
        raise _not_found(path, explicit) from None
    cached = _loaded.get(path)
    if cached is not None and cached[:2] == (data, base):
        return cached[2]
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise PluginError(
            f"config file {path!r} is not UTF-8 text (byte {data[exc.start]:#04x} at offset "
            f"{exc.start}): save it as UTF-8"
        ) from None
    config = _from_copy(copies, path, text, base) if copies else None
    if config is None:
        config = parse(text, source=path, base=base)
        if copies is not None and not config.resident:  # a helper, if any, keeps it in memory
            if config.etcd.auth.password:  # a secret never goes to disk: parse every call
                copies.drop(path)
            else:
                copies.put(path, msgspec.json.encode(_Copy(_digest(text), base, _raw(config))))
    _loaded[path] = (data, base, config)
    return config


def _from_copy(copies: ParsedCopies, path: str, text: str, base: str) -> Config | None:
    found = copies.get(path)
    if found is None:
        return None
    try:
        copy = msgspec.json.decode(found, type=_Copy)
        if copy.base != base or copy.digest != _digest(text):
            return None
        return msgspec.json.decode(copy.config, type=Config)
    except (msgspec.DecodeError, ValueError):  # an older release's copy, say: parse afresh
        return None


def _raw(config: Config) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(config))


def parse(text: str, *, source: str = "config", base: str | None = None) -> Config:
    """``base``: the directory relative paths are relative to (the config file's); without
    one they stay relative, to the working directory."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        raw = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        where = _one_line(exc).replace('in "<unicode string>", ', "at ")  # the file is named
        raise PluginError(f"config {source!r} is not valid YAML: {where}") from None
    except Exception as exc:  # what PyYAML lets through: a date's ValueError, say
        reason = _one_line(exc)
        raise PluginError(f"config {source!r} has a value YAML cannot read: {reason}") from None
    if raw is None:  # an empty file, or one caught mid-write by a tool that truncates first
        raise PluginError(
            f"config {source!r} is empty: it needs at least an etcd section (write the file "
            "aside and rename it into place, so a call never reads it half-written)"
        )
    refused, noted = stray_keys(raw)
    if refused:
        listed = ", ".join(refused)
        raise PluginError(
            f"config {source!r}: unknown key{'s' * (len(refused) > 1)} {listed}: neither this "
            "plugin's nor core's (sample-config prints the sample, which holds every key)"
        )
    try:
        config = msgspec.convert(raw, Config)
    except msgspec.ValidationError as exc:
        raise PluginError(f"config {source!r}: {_one_line(exc)}") from None
    if noted:
        config = msgspec.structs.replace(config, unrecognised=noted)
    return _anchored(config, base)


def _anchored(config: Config, base: str | None) -> Config:
    """The config with ``~`` expanded in its paths, and relative ones joined to ``base``."""

    def anchored(path: str) -> str:
        path = os.path.expanduser(path) if path else path
        return os.path.join(base, path) if path and base else path

    etcd, streams = config.etcd, config.streams
    return msgspec.structs.replace(
        config,
        etcd=msgspec.structs.replace(
            etcd, ca=anchored(etcd.ca), cert=anchored(etcd.cert), key=anchored(etcd.key)
        ),
        streams=msgspec.structs.replace(
            streams,
            archive_dir=anchored(streams.archive_dir),
            export_dir=anchored(streams.export_dir),
        ),
    )


def _read(path: str, explicit: str | None) -> bytes:
    try:
        return read_small_file(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise _not_found(path, explicit) from None
    except OSError as exc:
        raise PluginError(f"cannot read config file {path!r}: {exc.strerror or exc}") from None
    except UnfitFile as exc:
        raise PluginError(
            f"config file {path!r} {exc}: point --config or ${ENV_VAR} at the plugin's config"
        ) from None
    except ValueError as exc:  # a NUL in the path
        raise PluginError(f"cannot read config file {path!r}: {exc}") from None


def _not_found(path: str, explicit: str | None) -> PluginError:
    """Where the file was looked for, and why there."""
    if explicit:
        why = "named by --config"
    elif os.environ.get(ENV_VAR):
        why = f"named by ${ENV_VAR}"
    else:
        why = f"the default: neither --config nor ${ENV_VAR} named one"
    where = path
    if not os.path.isabs(path):
        try:
            where = os.path.join(os.getcwd(), path)
        except OSError:
            where = f"{path} in a working directory that no longer exists"
    return PluginError(
        f"config file {path!r} not found: looked at {where} ({why}); pass --config PATH or "
        f"set {ENV_VAR}"
    )


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line: PyYAML's spans several, indented."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
