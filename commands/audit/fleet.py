"""``nodes --html DIR``: the fleet as pages. Every node listed gets its life page (``life``, as
``history NODE --html`` writes it), and ``index.html`` a row a node (``fleet_page``), linked to
it.

The pages are written into a new directory beside DIR and put in DIR's place only when all of
them are written: a run that fails or is refused leaves DIR as it was, and nothing beside it.
A fleet past ``MOST_NODES`` or ``MOST_EVENTS`` is refused before anything is read or made."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from msgspec import Struct

from resource_extend.commands.audit import fleet_page, life
from resource_extend.commands.audit.reading import Listed, positions_of
from resource_extend.commands.program import installed_version
from resource_extend.commands.protocol import Session
from resource_extend.commands.under_click import with_progress
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.upkeep.history import Archive, Selection

MOST_NODES = 2_000
"""The most nodes one index lists (each with its own page)."""
MOST_EVENTS = 200_000
"""The most events all the fleet's pages hold together: ten times the most of one page."""
INDEX = "index.html"


def write(
    session: Session[Struct],
    listed: list[Listed],
    archive: Archive,
    directory: str,
    patterns: Sequence[str] = (),
) -> str:
    """Write the fleet's pages (the nodes ``patterns`` selected) to ``directory``; what was
    written, in one line."""
    refuse_past_bounds(listed)
    target = Path(directory)
    refuse_to_replace(target)
    try:
        rows = _written(session, listed, archive, target, patterns)
    except OSError as exc:
        raise PluginError(
            f"cannot write {str(target)!r}: {exc.strerror or exc}; nothing was written"
        ) from None
    disagree = sum(not row.verdict.agrees for row in rows)
    filled = sum(fleet_page.full(row) for row in rows)
    return (
        f"wrote {target / INDEX}: {len(rows):,} node{'s' * (len(rows) != 1)} "
        f"({disagree:,} disagree, {filled:,} full), each with its page beside it"
    )


def _written(
    session: Session[Struct],
    listed: list[Listed],
    archive: Archive,
    target: Path,
    patterns: Sequence[str],
) -> list[fleet_page.Node]:
    """Every page written into a new directory beside ``target``, then put in its place."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        rows = []
        with with_progress(listed, "writing pages") as walked:
            for node in walked:
                rows.append(_page(session, node, archive, staging))
        fleet = fleet_page.Fleet(
            program=session.kind.program,
            nodes=rows,
            written=datetime.now(timezone.utc),
            version=installed_version(),
            source=life.source(session),
            selected=" ".join(f"--match {shlex.quote(pattern)}" for pattern in patterns),
        )
        (staging / INDEX).write_text(fleet_page.render(fleet), encoding="utf-8")
        _publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return rows


def refuse_past_bounds(listed: list[Listed]) -> None:
    """Refuse a fleet of more than ``MOST_NODES`` nodes or ``MOST_EVENTS`` events, or with a
    node past one page's bound, saying how to select fewer."""
    if len(listed) > MOST_NODES:
        raise PluginError(
            f"{len(listed):,} nodes selected: a fleet's pages hold at most {MOST_NODES:,}; "
            "select fewer with --match GLOB; nothing was written"
        )
    events = sum(node.events for node in listed)
    if events > MOST_EVENTS:
        raise PluginError(
            f"{events:,} events in the {len(listed):,} nodes selected: a fleet's pages hold at "
            f"most {MOST_EVENTS:,}; select fewer with --match GLOB (or compact the longest "
            "streams); nothing was written"
        )
    for node in listed:
        if node.events > life.MOST:
            raise PluginError(
                f"node {node.name} has {node.events:,} events: a page holds at most "
                f"{life.MOST:,}; leave it out with --match, or page it alone with history "
                "--since; nothing was written"
            )


def refuse_to_replace(target: Path) -> None:
    """DIR may be new (its parent must exist), empty, or an earlier fleet's pages (its index
    says so); anything else is refused before anything is made."""
    if not target.parent.is_dir():
        raise PluginError(f"cannot write {str(target)!r}: {target.parent} is not a directory")
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise PluginError(f"{target} is not a directory: give a new or empty directory")
    if target.is_dir() and any(target.iterdir()) and not _earlier_fleet(target):
        raise PluginError(
            f"{target} holds files that are not an earlier fleet's pages: give a new or empty "
            "directory; nothing was written"
        )


def _earlier_fleet(target: Path) -> bool:
    index = target / INDEX
    try:
        with open(index, "rb") as file:
            start = file.read(256)
    except OSError:
        return False
    return f'<meta name="generator" content="{fleet_page.GENERATOR}">'.encode() in start


def _page(
    session: Session[Struct], node: Listed, archive: Archive, staging: Path
) -> fleet_page.Node:
    """Write ``node``'s life page into ``staging``; its row in the index."""
    try:
        positions = positions_of(session, node.name)
        first = positions.at_or_after(positions.first) if positions.first else None
        page = life.gather(session, node.name, positions, first, Selection(), archive)
    except PluginError as exc:  # its page and its row say why, and the fleet goes on
        page = life.unread(session, node.name, exc.reason)
    name = page_name(node.name)
    (staging / name).write_text(life.html_of(session, page), encoding="utf-8")
    view = session.view
    measures = [m for m in view.measures(node.state) if m.headline] if node.state else []
    return fleet_page.Node(
        name=node.name,
        page=name,
        status=node.status,
        measures=measures,
        verdict=page.verdict,
        last=page.rows[-1][0] if page.rows else None,
        events=node.events,
    )


def page_name(node: str) -> str:
    """The file of ``node``'s page: its name made safe for a file (``node-gpu-1.html``), or,
    for a name too long once quoted, its digest."""
    quoted = quote(node, safe="")
    if len(quoted) > 200:
        quoted = hashlib.sha256(node.encode()).hexdigest()[:32]
    return f"node-{quoted}.html"


def _publish(staging: Path, target: Path) -> None:
    """Put the written pages in DIR's place: a rename onto a new or empty DIR; an earlier
    fleet's pages are moved aside first, and removed once the new ones are in."""
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)
    if target.is_dir() and any(target.iterdir()):
        refuse_to_replace(target)  # again: what is there now, not what was at the start
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        os.rename(target, aside / "pages")
        try:
            os.rename(staging, target)
        except OSError:
            os.rename(aside / "pages", target)
            raise
        finally:
            shutil.rmtree(aside, ignore_errors=True)
        return
    os.rename(staging, target)
