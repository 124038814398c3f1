"""``history NODE --html FILE``: gather what the page shows (the rows selected, the rows charted,
``verify``'s verdict), have ``page`` render it, and write it whole or not at all."""

from __future__ import annotations

import os
import shlex
import sys
from datetime import datetime, timezone

from msgspec import Struct

from resource_extend.commands.audit.page import Page, Source, Verdict, counted, render
from resource_extend.commands.audit.reading import NOT_ADOPTED, summary
from resource_extend.commands.audit.verify import export_dirs
from resource_extend.commands.program import installed_version
from resource_extend.commands.protocol import Session
from resource_extend.ledger.host.files import NotReplaced, write_whole
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.store.appender import who
from resource_extend.ledger.store.positions import Positions
from resource_extend.ledger.upkeep.history import Archive, Row, Selection, selected, window
from resource_extend.ledger.upkeep.verification import Trust, verify_node

MOST = 20_000
"""The most events one page holds: 10,000 make a page of 7.0 MB that headless Chromium opens in
3.0 s (docs/auditing.md); a whole stream of a million would make one no browser opens."""


def write(session: Session[Struct], page: Page, path: str) -> str:
    """Write ``page`` (``gather``'s) to ``path``; what was written, in one line (``-``: the
    page, to print)."""
    html = html_of(session, page)
    if path == "-":
        return html.rstrip("\n")
    try:
        write_whole(path, html.encode())
    except NotReplaced as exc:
        raise PluginError(f"{exc.strerror}; give a new file's path, or - for stdout") from None
    except OSError as exc:
        raise PluginError(f"cannot write {path!r}: {exc.strerror or exc}") from None
    agrees = "agrees" if page.verdict.agrees else "disagrees"
    return f"wrote {path}: node {page.node}, {counted(len(page.rows))}; verify: {agrees}"


def gather(
    session: Session[Struct],
    node: str,
    positions: Positions[Struct],
    first: Event | None,
    select: Selection,
    archive: Archive,
) -> Page:
    """What NODE's page shows: the events ``select`` picks (and those the charts follow),
    ``verify``'s verdict, where they were read; more than ``MOST`` events is refused."""
    rows: list[Row] = []
    charted: list[Row] = []
    notes = [said] if (said := selection_note(select)) else []
    if first is None:
        notes.append(NOT_ADOPTED)
    else:
        if not select.kinds and select.limit is None:  # refused before a long stream is read
            low, high = window(positions, select.since, select.until)
            too_many(high - low + 1)
        rows = selected(session.kind, positions, first, select, archive)
        too_many(len(rows))
        charted = rows
        if rows and select.kinds:  # the charts follow every event between
            since, until = rows[0][0].seq, rows[-1][0].seq
            too_many(until - since + 1, "the charts would follow")
            charted = selected(session.kind, positions, first, Selection(since, until), archive)
        if charted and isinstance(charted[0][0].change, Checkpoint):
            notes.append(
                f"The stream starts with a checkpoint: {audit.compacted_note(charted[0][0])}"
            )
    return Page(
        program=session.kind.program,
        node=node,
        rows=rows,
        charted=charted,
        verdict=verdict(session, node, archive),
        notes=notes,
        written=datetime.now(timezone.utc),
        version=installed_version(),
        source=source(session, node),
    )


def unread(session: Session[Struct], node: str, reason: str) -> Page:
    """The page of a node whose stream could not be read: why, and no events."""
    return Page(
        program=session.kind.program,
        node=node,
        rows=[],
        charted=[],
        verdict=Verdict(False, [f"cannot read the stream: {reason}"]),
        notes=[f"The stream could not be read: {reason}"],
        written=datetime.now(timezone.utc),
        version=installed_version(),
        source=source(session, node),
    )


def html_of(session: Session[Struct], page: Page) -> str:
    """The page, rendered with the kind's view."""
    return render(page, session.view, lambda event: summary(session.view, event))


def source(session: Session[Struct], node: str | None = None) -> Source:
    """Where the events were read (etcd's endpoints, the prefix, and the keys: ``node``'s, or
    every node's), the command line as it was typed, and the account that ran it."""
    etcd, keys = session.config.etcd, session.store.keys
    if node is None:
        read = f"heads {keys.root.decode()}*, events {keys.events_root.decode()}*"
    else:
        read = f"head {keys.head(node).decode()}, events {keys.events(node).decode()}*"
    command = shlex.join([os.path.basename(sys.argv[0]), *sys.argv[1:]])
    return Source(etcd.machines, etcd.prefix, read, command, who())


def too_many(count: int, what: str = "selected") -> None:
    """Refuse a page of more than ``MOST`` events, saying how to select fewer."""
    if count > MOST:
        raise PluginError(
            f"{count:,} events {what}: a page holds at most {MOST:,}; select fewer with "
            "--since, --until, --kind or --limit"
        )


def selection_note(select: Selection) -> str:
    """What the auditor selected, as the options said it (empty: everything)."""
    said = []
    if select.since is not None:
        said.append(f"--since {audit.shown_point(select.since)}")
    if select.until is not None:
        said.append(f"--until {audit.shown_point(select.until)}")
    said += [f"--kind {kind}" for kind in select.kinds]
    if select.limit is not None:
        said.append(f"--limit {select.limit}")
    return f"Selected: {' '.join(said)}" if said else ""


def verdict(session: Session[Struct], node: str, archive: Archive) -> Verdict:
    """What ``verify NODE`` (with the same archive) says of the node now: read-only."""
    exports = archive.directory or ""
    directories = export_dirs(session, exports)
    try:
        found = verify_node(session.store, node, Trust(exports), False, directories)
    except PluginError as exc:
        return Verdict(False, [f"cannot verify: {exc.reason}"])
    return Verdict(found.agrees, found.findings)
