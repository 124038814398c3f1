"""``verify``'s walk of one node (:func:`verify_node`): its head against its stream, read a page
at a time, repaired with ``repair`` as a ``head_repaired`` event; the exports its checkpoints
name, back to event 1 (``chain``); and the exports of killed compactions (``orphans``). The
command (``commands.audit.verify``) is its options and its report."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec

from resource_extend.ledger.model import audit, verdicts
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.digests import EMPTY, named_by_next, tip_of
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.model.walk import Walk
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep import export, orphans
from resource_extend.ledger.upkeep.chain import walk

NodeState = Any
"""Whichever kind's state: verification is the ledger's, written once for every kind."""

REPAIR_ATTEMPTS = 5
"""Repairs of a head tried while the node keeps changing under them."""


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Verified(msgspec.Struct):
    """What verify found of one node."""

    findings: list[str] = msgspec.field(default_factory=list)
    """What to report (empty when all is well): disagreements, repairs, notes."""
    agrees: bool = True
    """No disagreement is left (there was none, or it was repaired)."""
    known: bool = True
    """The node has a head or events: one that has neither is not a disagreement, and
    ``--repair`` has nothing to repair."""
    repaired: int = 0
    exports_read: int = 0
    exports_elsewhere: int = 0
    tip: str = ""
    """``seq N, digest D``: where the stream ends and the digest its next event will name."""
    clocks: list[str] = msgspec.field(default_factory=list)
    """Events stamped by a clock ahead (``audit.stamped_ahead``, ``audit.ahead_of_now``):
    noted, not a disagreement."""


def _verify_head(
    store: Store[NodeState], node: str, repair: Trust | None, found: Verified
) -> Event | None:
    """Check (and, given ``repair``, repair) the node's head against its stream, read a page
    at a time; the stream's first event. A head is rewritten only from a stream whose first
    checkpoint checks out against its export (``repair``)."""
    for _ in range(REPAIR_ATTEMPTS):
        opened = store.streams.open_stream(node)
        walk: Walk[NodeState] = Walk(store.kind)
        for page in opened.pages:
            walk.feed(page.events, page.raw)
        if opened.head is None and walk.last is None:
            found.known = False
            return None
        if walk.last is not None:
            found.tip = f"seq {walk.last.seq}, digest {named_by_next(walk.last, walk.last_raw)}"
            found.clocks = _clock_notes(walk)
        verdict = verdicts.judge(opened.head, walk)
        stray = store.streams.stray_keys(node) if opened.head is not None else []
        if stray:
            shown = ", ".join(repr(key) for key in stray[:3])
            more = f" and {len(stray) - 3} more" if len(stray) > 3 else ""
            found.findings.append(f"keys that are not its events: {shown}{more}")
            found.agrees = False
        if not verdict.problems:
            return walk.first
        report = "; ".join(verdict.problems)
        if not repair:
            found.findings.append(report)
            found.agrees = False
            return walk.first
        if not verdict.repairable:
            found.findings.append(f"{report} (not repairable: the stream itself is broken)")
            found.agrees = False
            return walk.first
        untrusted = repair.start(store.kind, walk.first)
        if untrusted:
            found.findings.append(f"{report} (not repaired: {untrusted})")
            found.agrees = False
            return walk.first
        last = walk.last.seq if walk.last is not None else 0
        tip = tip_of(walk.last, walk.last_raw) if walk.last is not None else EMPTY
        change, state = verdicts.repair(store.kind, opened.head, verdict)
        event = store.appender.new_event(last + 1, "verify", change, after=tip, state=state)
        if store.appender.repair_head(node, opened.head_revision, event, state):
            found.findings.append(f"{report} -> repaired (event {event.seq})")
            found.repaired += 1
            return walk.first
    found.findings.append("not repaired: the node kept changing while it was being repaired")
    found.agrees = False
    return None


SHOWN_NOTES = 3
"""Clock notes shown per node before "and N more"."""


def _clock_notes(walk: Walk[NodeState]) -> list[str]:
    """What ``walk`` noted of clocks ahead, and whether its last event is stamped ahead of
    this host's clock now (``audit.AHEAD_BOUND``)."""
    notes = list(walk.notes)
    if walk.last is not None and (ahead := audit.ahead_of_now(walk.last, utc_now())) is not None:
        notes.append(ahead)
    return notes


class Trust(msgspec.Struct, frozen=True):
    """Where exports are read (``--archive``), and whether one that cannot be read here is
    taken on trust (``--allow-elsewhere``)."""

    archive: str
    allow_elsewhere: bool = False

    def start(self, kind: Kind[NodeState], first: Event | None) -> str:
        """Why a stream that starts with ``first`` may not be folded into a head: its
        checkpoint does not check out against its export, or its export cannot be read here
        (unless allowed); empty when it may."""
        if first is None or not isinstance(first.change, Checkpoint):
            return ""

        link = next(walk(kind, first, self.archive))
        if link.checked is None:
            if link.found.state == "elsewhere" and self.allow_elsewhere:
                return ""
            return f"its checkpoint's {link.what} cannot be checked here ({link.found.state})"
        if link.checked.problems:
            return f"its checkpoint's {link.what} does not check out"
        return ""


def _verify_exports(
    kind: Kind[NodeState],
    node: str,
    checkpoint: Event,
    trust: Trust,
    repair: bool,
    found: Verified,
) -> None:
    """Follow the chain of exports from ``checkpoint`` back to event 1, checking each one
    that is here (``ledger.upkeep.chain``); with ``repair``, publish one an interrupted compaction
    left unpublished, once its content checks out."""
    for link in walk(kind, checkpoint, trust.archive):
        file, checked, what = link.found, link.checked, link.what
        if file.state == "elsewhere":
            where = "in the archive" if file.host == export.ARCHIVE else f"on host {file.host}"
            if trust.allow_elsewhere:
                found.findings.append(f"{what} is {where}: not checked here (allowed)")
                found.exports_elsewhere += 1
            else:
                read = "--archive DIR reads it; " if file.host == export.ARCHIVE else ""
                found.findings.append(
                    f"{what} is {where}: not checked here, so neither is its checkpoint "
                    f"({read}--allow-elsewhere takes it on trust)"
                )
                found.agrees = False
            return
        if checked is None:
            reason = "is missing" if file.state == "missing" else f"cannot be read: {file.reason}"
            found.findings.append(f"{what} {reason}")
            found.agrees = False
            return
        found.exports_read += 1
        if checked.problems:
            found.findings.append(f"{what}: {'; '.join(checked.problems)}")
            found.agrees = False
            return
        if file.state == "unpublished":
            left = (
                f"{what} was left unpublished by an interrupted compaction "
                f"(as {file.path.name}{export.PARTIAL})"
            )
            if repair:
                export.publish(file.path, node, kind.program)
                found.findings.append(f"{left} -> published")
                found.repaired += 1
            else:
                found.findings.append(left)
                found.agrees = False


def verify_node(
    store: Store[NodeState], node: str, trust: Trust, repair: bool, directories: list[str]
) -> Verified:
    """Check one node: its head against its stream (with ``repair``, rewriting a head that
    disagrees), the exports its checkpoints name back to event 1, and the exports of
    compactions killed before their commit left in ``directories``."""
    found = Verified()
    first = _verify_head(store, node, trust if repair else None, found)
    found.findings += [f"note: {note}" for note in found.clocks[:SHOWN_NOTES]]
    if found.clocks[SHOWN_NOTES:]:
        found.findings.append(f"and {len(found.clocks) - SHOWN_NOTES} more stamped ahead")
    if first is not None and isinstance(first.change, Checkpoint):
        _verify_exports(store.kind, node, first, trust, repair, found)
    _orphans(store, node, directories, repair, found)
    return found


def _orphans(
    store: Store[NodeState], node: str, directories: list[str], repair: bool, found: Verified
) -> None:
    """Note (with ``repair``: delete) the ``.partial`` exports of compactions killed before
    their commit, whose events are all still in etcd (``ledger.upkeep.orphans``): leftovers, not a
    disagreement."""
    for directory in directories:
        left = [
            partial for partial in orphans.find_in(store.scans, directory, node) if partial.orphan
        ]
        if not left:
            continue
        names = ", ".join(partial.path.name for partial in left)
        if repair:
            if orphans.sweep(store, node, left) is None:
                found.findings.append(
                    f"orphaned exports (their events are in etcd): {names}: a compaction "
                    "committed meanwhile; kept, to be looked at again"
                )
                continue
            found.findings.append(
                f"orphaned exports (their events are in etcd) -> removed: {names}"
            )
            found.repaired += len(left)
        else:
            found.findings.append(f"orphaned exports (their events are in etcd): {names}")
