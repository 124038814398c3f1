"""``doctor``'s etcd checks: every ``etcd.machines`` endpoint on its own, not through the
fail-over connection (reachable; TLS with the configured ca/cert/key; the credentials accepted;
the server's version; the prefix readable), the cluster's alarms, whether it keeps what it
answers (``doctor_durability``), and this host's clock against etcd's.

The clock is read from the ``Date`` of etcd's answer to ``GET /version`` on its HTTP gateway
(the client port serves it beside gRPC, so with ``etcd.transport: grpc`` too) and judged by
``doctor_clock``; the rest goes through the configured transport, as the plugin's own calls
do.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from resource_extend.commands.doctor.clock import clock_offset, judge_clock
from resource_extend.commands.doctor.durability import CHECK as DURABILITY
from resource_extend.commands.doctor.durability import check_durability, parse_version
from resource_extend.commands.doctor.findings import Finding, fail, not_checked, ok, warn
from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.choice import choose
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.etcd.transport import (
    PLAIN_HINT,
    TLS_HINT,
    HttpTransport,
    NotEtcd,
    Refused,
    Transport,
    Unavailable,
)
from resource_extend.ledger.host.config import Config, EtcdConfig
from resource_extend.ledger.model.counts import plural
from resource_extend.ledger.model.errors import StoreError
from resource_extend.ledger.store.keys import KeyLayout, range_end

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

MIN_VERSION = (3, 4)
"""The oldest etcd the plugins support: its JSON gateway serves ``/v3/`` from 3.4 on (3.3
named it ``/v3beta/``)."""
TLS_SIGNS = ("TLS", "SSL", "certificate", "handshake", "etcd.ca", "etcd.cert", "etcd.key")
AUTH_SIGNS = ("authentication failed", "unauthenticated", "user name", "invalid auth token")
REACH_FIX = (
    "start etcd there, or correct the etcd.machines entry {entry!r} (a client URL, "
    "http(s)://host:port, of a running member)"
)
ENTRY_FIX = (
    "correct the etcd.machines entry {entry!r} as the message says: a client URL of a running "
    "member (what etcd's --advertise-client-urls names)"
)
SCHEME_FIX = (
    "if etcd serves TLS there, write https:// in the etcd.machines entry {entry!r} (and set "
    "etcd.ca); else start etcd there"
)
TLS_FIX = (
    "set etcd.ca to the CA that signed etcd's certificate (and etcd.cert/etcd.key to a client "
    "certificate etcd's --trusted-ca-file trusts, if it asks for one); the URL's host must be "
    "one etcd's certificate names"
)
AUTH_FIX = (
    "set etcd.auth.username and etcd.auth.password to a user etcd knows, whose role may read "
    "and write {prefix}/resource/ and {prefix}/resource-events/ (etcdctl role "
    "grant-permission ROLE --prefix=true readwrite {prefix}/)"
)


class EtcdFindings(msgspec.Struct):
    """What later checks need to know of etcd: whether any endpoint answered."""

    reachable: bool = False


class Probe(msgspec.Struct):
    """One endpoint, checked."""

    index: int
    where: str
    finding: Finding
    answered: bool = False
    """It answered every request: later checks may use it."""
    offset: float | None = None
    """Seconds etcd's clock is at least ahead (+) or behind (-) this host's; None: not read."""
    version: str = ""
    """The server's version, as it said it (empty: not said)."""


class _Version(msgspec.Struct):
    etcdserver: str = ""


def check_etcd(plugin: Plugin, config: Config, probed: EtcdFindings) -> list[Finding]:
    """Each endpoint, then the alarms and the members (asked of the first that answered),
    then the clock."""
    settings = config.etcd
    root = KeyLayout(settings.prefix, plugin.kind).root
    probes = [probe(settings, index, root) for index in range(len(settings.machines))]
    answering = [p for p in probes if p.answered]
    probed.reachable = bool(answering)
    findings = [p.finding for p in probes]
    if answering:
        first = open_transport(_single(settings, answering[0].index))
        try:
            findings.append(check_alarms(first, settings.timeout))
            versions = [p.version for p in answering]
            findings.append(check_durability(first, settings.timeout, versions))
        finally:
            first.close()
    else:
        findings.append(not_checked("etcd alarms", "no etcd endpoint passed its check"))
        findings.append(not_checked(DURABILITY, "no etcd endpoint passed its check"))
    offsets = [(p.where, p.offset) for p in probes if p.offset is not None]
    findings.append(judge_clock(offsets, config.streams.min_age))
    return findings


def _single(settings: EtcdConfig, index: int) -> EtcdConfig:
    """The settings with only endpoint ``index``: a transport that cannot fail over."""
    return msgspec.structs.replace(settings, machines=[settings.machines[index]])


def probe(settings: EtcdConfig, index: int, root: bytes) -> Probe:
    """Check one endpoint: ``GET /version`` on its HTTP gateway (reachable, TLS, version, the
    clock), then, through the configured transport, its status (the credentials) and a count
    of the heads under the prefix (permission to read it)."""
    entry = settings.machines[index]
    single = _single(settings, index)
    endpoint = single.endpoints[0]
    where = endpoint.address
    check = f"etcd {where}"
    carriers = _carriers(settings.transport)
    gateway = HttpTransport(single)
    opened: list[Transport] = [gateway]
    found = Probe(index, where, ok(check, ""))
    version = ""
    gateway_failure = ""
    try:
        try:
            sent = time.time()
            reply = gateway.get(0, "/version", settings.timeout)
            received = time.time()
            if reply.status == 200:
                version = msgspec.json.decode(reply.body, type=_Version).etcdserver
            date = reply.date()
            if date is not None:
                found.offset = clock_offset(date, sent, received)
        except (Unavailable, StoreError, msgspec.DecodeError) as exc:
            if "http" in carriers:
                raise
            gateway_failure = str(exc)
        if "grpc" in carriers:
            opened.append(open_transport(msgspec.structs.replace(single, transport="grpc")))
        heads = wire.RangeRequest(key=root, range_end=range_end(root), count_only=True)
        for calls in opened if "http" in carriers else opened[1:]:
            status = calls.send(0, wire.StatusRequest(), wire.StatusResponse, settings.timeout)
            counted = calls.send(0, heads, wire.RangeResponse, settings.timeout)
    except NotEtcd as exc:
        found.finding = fail(check, str(exc), ENTRY_FIX.format(entry=entry))
        return found
    except Unavailable as exc:
        found.finding = _unreachable(check, entry, str(exc))
        return found
    except Refused as exc:
        found.finding = _refused(check, settings, str(exc))
        return found
    except (StoreError, msgspec.DecodeError) as exc:
        reason = exc.reason if isinstance(exc, StoreError) else f"not etcd's answer: {exc}"
        fix = TLS_FIX if _tls(reason) else "do what the message says"
        found.finding = fail(check, reason, fix)
        return found
    finally:
        for transport in opened:
            transport.close()
    found.answered = True
    found.version = version or status.version
    found.finding = _answered(check, settings, endpoint.tls, found.version, counted)
    if gateway_failure:
        found.finding = msgspec.structs.replace(
            found.finding,
            message=f"{found.finding.message}; its HTTP gateway did not answer "
            f"({gateway_failure}): clock not read there",
        )
    return found


def _carriers(setting: str) -> list[str]:
    """The transports some request takes under ``etcd.transport``, HTTP first: a core call's
    in a process of its own, and one's through the helper, a scan or not
    (``ledger.etcd.choice.choose``)."""
    taken = {
        choose(setting, many_calls=many, scan=scan).transport
        for many in (False, True)
        for scan in (False, True)
    }
    return sorted(taken, reverse=True)


def _answered(
    check: str, settings: EtcdConfig, tls: bool, version: str, counted: wire.RangeResponse
) -> Finding:
    carriers = _carriers(settings.transport)
    over = " and ".join("gRPC" if name == "grpc" else "HTTP" for name in carriers)
    who = f"user {settings.auth.username}" if settings.auth.username else "no auth"
    records = plural(counted.count, "node record")
    message = (
        f"answers over {over} ({'TLS' if tls else 'no TLS'}, {who}): etcd "
        f"{version or '(version not said)'}; {records} under {settings.prefix}"
    )
    if _older(version, MIN_VERSION):
        oldest = ".".join(map(str, MIN_VERSION))
        return warn(
            check,
            f"{message}; etcd {version} is older than {oldest}, the oldest the plugins support",
            f"upgrade etcd to {oldest} or later (its JSON gateway serves /v3/ from {oldest})",
        )
    return ok(check, message)


def _unreachable(check: str, entry: str, reason: str) -> Finding:
    reason = reason.removeprefix("unavailable: ")
    if PLAIN_HINT in reason:  # an https:// URL for a plain etcd, most likely
        return fail(check, f"TLS handshake failed: {reason}", ENTRY_FIX.format(entry=entry))
    if TLS_HINT in reason:  # an http:// URL for a TLS-only etcd, most likely
        return fail(check, f"unreachable: {reason}", SCHEME_FIX.format(entry=entry))
    if _tls(reason):
        return fail(check, f"TLS handshake failed: {reason}", TLS_FIX)
    return fail(check, f"unreachable: {reason}", REACH_FIX.format(entry=entry))


def _refused(check: str, settings: EtcdConfig, reason: str) -> Finding:
    prefix = settings.prefix.rstrip("/")
    if any(sign in reason for sign in AUTH_SIGNS):
        user = settings.auth.username
        message = (
            f"credentials refused for user {user!r}: {reason}"
            if user
            else f"etcd wants credentials and etcd.auth sets none: {reason}"
        )
        return fail(check, message, AUTH_FIX.format(prefix=prefix))
    if "permission_denied" in reason or "permission denied" in reason:
        user = settings.auth.username or "(none)"
        message = f"user {user} may not read {settings.prefix}: {reason}"
        return fail(check, message, AUTH_FIX.format(prefix=prefix))
    if _tls(reason):
        return fail(check, f"TLS failed: {reason}", TLS_FIX)
    return fail(check, f"etcd refused: {reason}", "see etcd's log on that host")


def _tls(reason: str) -> bool:
    return any(sign in reason for sign in TLS_SIGNS)


def _older(version: str, oldest: tuple[int, int]) -> bool:
    """Whether ``version`` (``3.5.1``) is older than ``oldest``; False when it cannot tell."""
    parsed = parse_version(version)
    return parsed is not None and parsed[:2] < oldest


def check_alarms(transport: Transport, timeout: float) -> Finding:
    """The cluster's raised alarms, asked of ``transport``'s one endpoint."""
    check = "etcd alarms"
    try:
        answer = transport.send(0, wire.AlarmRequest(), wire.AlarmResponse, timeout)
    except (Unavailable, Refused) as exc:
        return warn(
            check,
            f"not checked: etcd did not list its alarms ({exc})",
            "as etcd's root user: etcdctl alarm list",
        )
    raised = sorted({member.alarm for member in answer.alarms} - {"NONE"})
    if not raised:
        return ok(check, "none raised")
    if "NOSPACE" in raised:
        return fail(
            check,
            f"raised: {', '.join(raised)}: etcd's database reached its quota "
            "(--quota-backend-bytes) and it refuses every write, core's included",
            "free space, then disarm: etcdctl compact REVISION; etcdctl defrag (each member); "
            "etcdctl alarm disarm ({prog} footprint shows the plugin's share)",
        )
    return fail(
        check,
        f"raised: {', '.join(raised)}",
        "see etcd's log; CORRUPT: restore that member from a snapshot (etcd's disaster "
        "recovery guide), then etcdctl alarm disarm",
    )
