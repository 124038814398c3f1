"""``doctor``'s look at the prefix: records the upstream plugin wrote that no write has adopted
yet, streams still in release 0.1's layout, and heads that disagree with their streams.

The listing is what ``nodes`` reads (one paged range over the heads, one keys-only range over
the streams); the drift check is ``verify``'s comparison of a head with the fold of its stream
(``ledger.model.verdicts``), read-only, on at most ``DRIFT_NODES`` nodes (a random sample when there
are more) whose streams hold at most ``DRIFT_EVENTS`` events each.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import msgspec
from msgspec import Struct

from resource_extend.commands.audit.foreign import WHY, foreign_keys
from resource_extend.commands.doctor.findings import Finding, fail, ok, warn
from resource_extend.commands.protocol import Session
from resource_extend.ledger.model import audit, verdicts
from resource_extend.ledger.model.counts import plural
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.walk import Walk
from resource_extend.ledger.store import Store

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin
    from resource_extend.ledger.store.scans import NodeKeys

DRIFT_NODES = 50
"""The most nodes whose heads doctor compares with their streams (``verify --all``: every one)."""
TIMES_NODES = 1000
"""The most nodes whose newest event doctor checks against this host's clock (batched reads
of one key each)."""
DRIFT_EVENTS = 2000
"""The longest stream doctor folds (a longer one is left to ``verify NODE``)."""
SHOWN = 5
"""Node names a message lists before "and N more"."""


def check_prefix(plugin: Plugin, explicit: str | None) -> list[Finding]:
    session: Session[Struct] = Session(plugin, explicit)
    try:
        store = session.store
        store.etcd.budget_per_request()  # the listing and the folds outlast one call's budget
        known, heads = store.scans.survey()
        upstream = _unadopted(store, heads, known)
        legacy = sorted(name for name, keys in known.items() if keys.legacy)
        candidates = sorted(
            name for name, keys in known.items() if not keys.legacy and name not in upstream
        )
        where = store.keys.root.decode(errors="replace")
        return [
            _upstream_finding(upstream, where),
            _foreign_finding(store, where),
            _legacy_finding(legacy),
            _drift_finding(store, candidates, len(heads)),
            _times_finding(store, candidates),
        ]
    finally:
        session.close()


def _unadopted(
    store: Store[Struct], heads: dict[str, bytes], known: dict[str, NodeKeys]
) -> list[str]:
    """The heads the upstream plugin wrote that have no stream (no ``seq``: not adopted)."""
    upstream = []
    for name, raw in sorted(heads.items()):
        try:
            if not known[name].stream and store.kind.read_head(raw).seq is None:
                upstream.append(name)
        except msgspec.DecodeError:
            pass  # an unreadable head: the drift check reports it
    return upstream


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _upstream_finding(upstream: list[str], where: str) -> Finding:
    check = "upstream records"
    if not upstream:
        return ok(check, f"every node record under {where} has its stream")
    return warn(
        check,
        f"{plural(len(upstream), 'node record')} the upstream plugin wrote "
        f"{'has' if len(upstream) == 1 else 'have'} no stream yet: "
        f"{_names(upstream)}. Their history starts with core's next write to each, which "
        "adopts the record as found; until then history and show have nothing of them",
        "nothing to repair: core's next write to each node adopts it. If the upstream plugin "
        "still writes to this prefix, stop it: one plugin per prefix",
    )


def _foreign_finding(store: Store[Struct], where: str) -> Finding:
    check = "foreign keys"
    found = foreign_keys(store.scans)
    if not found:
        return ok(check, f"every key under {where} names a node")
    return warn(
        check,
        f"keys under the prefix that name no node {WHY}: {', '.join(found[:SHOWN])}"
        f"{f' and {len(found) - SHOWN} more' if len(found) > SHOWN else ''}. The listings "
        "leave them out",
        "find out who wrote them; etcdctl del, with the key's bytes, removes one",
    )


def _legacy_finding(legacy: list[str]) -> Finding:
    check = "0.1 streams"
    if not legacy:
        return ok(check, "no stream is left in release 0.1's layout")
    return fail(
        check,
        f"{len(legacy)} nodes still keep their events in release 0.1's layout: "
        f"{_names(legacy)}. history, show and verify refuse them, and a write to one with a "
        "long stream fails",
        "{prog} migrate (it may run while core calls the plugin), then {prog} verify --all",
    )


def _drift_finding(store: Store[Struct], candidates: list[str], records: int) -> Finding:
    """Compare heads with their streams, on a bounded sample."""
    check = "drift"
    if not candidates:
        return ok(check, f"no streams to compare ({plural(records, 'node record')})")
    sample = _sample(candidates, DRIFT_NODES)
    bounds = store.scans.stream_bounds(sample)
    long = [name for name in sample if bounds[name].count > DRIFT_EVENTS]
    disagree: list[str] = []
    for name in sample:
        if name in long:
            continue
        try:
            opened = store.streams.open_stream(name)
            walk: Walk[Struct] = Walk(store.kind)
            for page in opened.pages:
                walk.feed(page.events, page.raw)
            problems = verdicts.judge(opened.head, walk).problems
        except PluginError as exc:
            problems = [f"cannot read: {exc.reason}"]
        if problems:
            disagree.append(f"{name} ({'; '.join(problems)})")
    folded = len(sample) - len(long)
    if len(sample) < len(candidates):
        scope = (
            f"a random {folded} of {len(candidates)} nodes ({{prog}} verify --all checks every one)"
        )
    else:
        scope = {0: "no node", 1: "the only node"}.get(folded, f"all {folded} nodes")
    skipped = (
        f"; not folded here, streams longer than {DRIFT_EVENTS} events: {_names(long)} "
        "({prog} verify NODE checks one)"
        if long
        else ""
    )
    if not disagree:
        agree = (
            "its head agrees with its stream" if folded == 1 else "heads agree with their streams"
        )
        return ok(check, f"{agree} (checked {scope}){skipped}")
    count = len(disagree)
    heads = f"{plural(count, 'head')} " + (
        "disagrees with its stream" if count == 1 else "disagree with their streams"
    )
    return fail(
        check,
        f"{heads} (checked {scope}): "
        f"{'; '.join(disagree[:SHOWN])}{'; ...' if len(disagree) > SHOWN else ''}{skipped}",
        "{prog} verify --all shows every disagreement; {prog} verify --all --repair rewrites "
        "each head from its stream (a whole stream only), recorded as an event",
    )


def _times_finding(store: Store[Struct], candidates: list[str]) -> Finding:
    """The newest event of each node (at most ``TIMES_NODES``, a random sample past that),
    against this host's clock: one stamped more than ``audit.AHEAD_BOUND`` ahead was written
    by a clock ahead, or raised to such an event's time, and every event after it carries that
    time until it has passed."""
    check = "event times"
    sample = _sample(candidates, TIMES_NODES)
    now = datetime.now(timezone.utc)
    ahead: list[str] = []
    for name, bounds in store.scans.stream_bounds(sample, tails=sample).items():
        if bounds.tail is None:
            continue
        try:
            tail = store.kind.events.decode(bounds.tail)
            note = audit.ahead_of_now(tail, now) or audit.raised_ahead_of_now(tail, now)
        except msgspec.DecodeError:
            continue  # an unreadable event: the drift check reports it
        if note is not None:
            ahead.append(f"{name} ({note})")
    scope = f"the newest event of {len(sample)} of {len(candidates)} nodes"
    if not ahead:
        return ok(check, f"no event is stamped ahead of this host's clock ({scope})")
    return fail(
        check,
        f"{len(ahead)} nodes' newest events are stamped more than {audit.AHEAD_BOUND:g} s ahead "
        f"of this host's clock: {'; '.join(ahead[:SHOWN])}{'; ...' if len(ahead) > SHOWN else ''}. "
        "Every later event carries that time (its writer's own kept as clock), so history "
        "and show --at see them late, and compaction here judges their age by their writers' "
        "clocks",
        "synchronise the clock of each host that wrote ahead (written by USER@HOST; where a "
        "time was raised, {prog} verify NODE names the earlier writer; NTP: timedatectl "
        "set-ntp true, or chrony); if this host's clock is the one that is wrong, this "
        "doctor's clock check says so. Nothing is lost meanwhile: this check passes once the "
        "stamped time has passed, and the events keep their writers' own clocks",
    )


def _sample(names: list[str], most: int) -> list[str]:
    """``names``, or a random ``most`` of them, in order."""
    if len(names) <= most:
        return names

    return sorted(random.sample(names, most))
