"""``verify``: check heads against their streams and checkpoints against their exports."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.audit.archive import archive_dir, archive_option
from resource_extend.commands.protocol import Session, answered, respond
from resource_extend.ledger.model import audit, verdicts
from resource_extend.ledger.model.digests import EMPTY, named_by_next, tip_of
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.model.kinds import Kind
from resource_extend.ledger.model.names import check_node_name
from resource_extend.ledger.model.walk import Walk
from resource_extend.ledger.model.words import plural
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep import export, orphans
from resource_extend.ledger.upkeep.chain import walk

NodeState = Any
"""Whichever kind's state: verify and compact are the ledger's, written once for every kind."""

REPAIR_ATTEMPTS = 5


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def nodes_or_all(nodes: tuple[str, ...], every: bool) -> None:
    """A usage error (exit 2) unless the command was given nodes or ``--all``, not both."""
    if every == bool(nodes):
        ctx = click.get_current_context()
        raise click.UsageError(f"name the nodes to {ctx.info_name}, or pass --all (not both)", ctx)


def named_nodes(store: Store[NodeState], nodes: tuple[str, ...], every: bool) -> list[str]:
    """The nodes named, or with ``every`` all under the prefix (``nodes_or_all`` checked)."""
    if every:
        return sorted(store.scans.list_nodes())
    return [check_node_name(node) for node in dict.fromkeys(nodes)]


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
            found.clocks = clock_notes(walk)
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


def clock_notes(walk: Walk[NodeState]) -> list[str]:
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


def _verify_one(
    store: Store[NodeState], node: str, trust: Trust, repair: bool, directories: list[str]
) -> Verified:
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


def streams_dir(session: Session[Struct]) -> str:
    """Where this host's compactions write when no archive is given (``StreamsConfig``)."""
    return session.config.streams.destination.directory


@click.command("verify")
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("--all", "every", is_flag=True, help="Every node under the prefix.")
@archive_option
@click.option(
    "--digests",
    is_flag=True,
    help=(
        "Also print each stream's end and its digest (SHA-256 of its last event as stored): "
        "kept outside etcd, it shows a history rewritten whole."
    ),
)
@click.option(
    "--allow-elsewhere",
    is_flag=True,
    help=(
        "Take an export that cannot be read here (on another host, or in an archive not "
        "given) on trust, noting it, rather than count its node as disagreeing: its "
        "checkpoint's state is then not checked."
    ),
)
@click.option(
    "--repair",
    is_flag=True,
    help=(
        "Rewrite each disagreeing head from its stream, recorded as a head_repaired event; "
        "publish an export an interrupted compaction left unpublished."
    ),
)
@answered
def verify(
    session: Session[Struct],
    nodes: tuple[str, ...],
    every: bool,
    archive: str | None,
    digests: bool,
    allow_elsewhere: bool,
    repair: bool,
) -> Any:
    """Fold each node's events and compare the result with its head (the record core reads);
    check the exports a compacted stream's checkpoints name, back to event 1.

    \b
    Prints one line per node that disagrees, saying what differs with both values:
      node n1: usage differs: head <the record's usage>, stream <what the events fold to>
    Exit status: 0 when every head agrees (or was repaired), 1 otherwise, and 1 for a named
    node that does not exist (no head and no events: said so, not counted as disagreeing).
    An event stamped more than 60 s ahead of this host's clock, or of the clock of the
    writer after it, is noted ("node n1: note: event 7 is stamped 3 h ahead ..."): its
    writer's clock was ahead. A note is no disagreement; doctor's "event times" check
    fails on it while it lasts.

    A compacted stream starts with a checkpoint naming its export: archive:<file> in the
    archive (read with --archive, or streams.archive_dir), or host:path. When that file is
    here it must hold exactly the events the checkpoint stands for: every line an
    event, seqs without gaps from event 1 or the previous checkpoint up to the checkpoint's,
    folding to the checkpoint's state, and the file name carrying the checkpoint's op (and
    its digest, from 0.8). The previous checkpoint's export is checked the same way, back to
    event 1. A missing or mismatched export is a disagreement, and so is one that cannot be
    read here (on another host, or in an archive not given), whose checkpoint then cannot be
    checked either: --allow-elsewhere notes it instead.

    With --repair, a head is rewritten from its stream when the stream is whole (no events
    missing) and its checkpoint checks out against its export. The repair is an event like
    any other: head_repaired, holding the head as it was found. An export left as
    <name>.partial by a compaction interrupted between its commit and the rename is renamed,
    once its content checks out. A head the upstream plugin wrote that has no stream yet is
    not a disagreement.
    """
    nodes_or_all(nodes, every)
    store = session.store
    store.etcd.budget_per_request()  # many nodes outlast one call's budget; no request may
    targets = named_nodes(store, nodes, every)
    exports = archive_dir(session, archive)
    trust = Trust(exports, allow_elsewhere)
    directories = list(dict.fromkeys(d for d in (exports, streams_dir(session)) if d))
    reports: list[str] = []
    total = Verified()
    failed = 0
    unknown: list[str] = []
    for node in targets:
        try:
            found = _verify_one(store, node, trust, repair, directories)
        except PluginError as exc:
            found = Verified(findings=[f"cannot verify: {exc.reason}"], agrees=False)
        if not found.known:
            unknown.append(node)
            continue
        if found.findings:
            reports.append(f"node {node}: {'; '.join(found.findings)}")
        if digests and found.tip:
            reports.append(f"node {node}: {found.tip}")
        failed += not found.agrees
        total.repaired += found.repaired
        total.exports_read += found.exports_read
        total.exports_elsewhere += found.exports_elsewhere
        total.clocks += found.clocks
    if reports:
        respond("\n".join(reports), text=True, io=session.io)
    verified = len(targets) - len(unknown)
    problems = []
    if failed:
        hint = "" if repair else " (--repair rewrites heads and publishes exports)"
        disagree = (
            "disagrees with its stream or exports"
            if failed == 1
            else ("disagree with their streams or exports")
        )
        problems.append(f"{failed} of {plural(verified, 'node')} {disagree}{hint}")
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if unknown[5:] else "")
        problems.append(
            f"no such {'node' if len(unknown) == 1 else 'nodes'} under the prefix (no head, "
            f"no events): {shown}"
        )
    if problems:
        raise PluginError("; ".join(problems))
    summary = f"{plural(verified, 'node')} verified: every head agrees with its stream"
    if total.exports_read:
        summary += f", {plural(total.exports_read, 'export')} checked"
    if total.exports_elsewhere:
        summary += f", {total.exports_elsewhere} elsewhere not checked (allowed)"
    if total.repaired:
        summary += f", {total.repaired} repaired"
    if total.clocks:
        summary += f"; {plural(len(total.clocks), 'event')} stamped by a clock ahead (noted)"
    return summary
