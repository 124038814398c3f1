"""``nodes --html DIR``: the fleet as pages. Every node listed gets its life page (``life``, as
``history NODE --html`` writes it), and ``index.html`` a row a node (``fleet_page``), linked to
it.

The pages are written into a new directory beside DIR and put in DIR's place only when all of
them are written: a run that fails or is refused leaves DIR as it was, and nothing beside it.
DIR may be new, empty, or hold an earlier fleet's pages and nothing else (the files its index
links to); what else it holds is named, and the run refused. A fleet past ``MOST_NODES`` or
``MOST_EVENTS`` is refused before anything is read or made.

A node's page is ``node-<its name, quoted>.html``; a name too long for that takes
``node=<digest>.html``, a form ``quote`` never writes (it writes no ``=``), so that no node's
name can be another's digest."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote, unquote

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
    target = Path(os.path.abspath(directory))  # "." names the directory, not its parent's "."
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
        rows: list[fleet_page.Node] = []
        pages: dict[str, str] = {}
        with with_progress(listed, "writing pages") as walked:
            for node in walked:
                rows.append(_page(session, node, archive, staging, pages))
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
    """DIR may be new (its parent must exist), empty, or an earlier fleet's pages and nothing
    else; anything else is refused, by name, before anything is made."""
    if not target.parent.is_dir():
        raise PluginError(f"cannot write {str(target)!r}: {target.parent} is not a directory")
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise PluginError(f"{target} is not a directory: give a new or empty directory")
    if target.is_dir():
        refuse_strangers(target, target)


SHOWN = 5
"""Entries a refusal names before "and N more"."""


def refuse_strangers(directory: Path, named: Path) -> None:
    """Refuse ``directory`` (DIR, shown as ``named``) if it holds anything but an earlier
    fleet's pages: its index (ours, by its generator tag) and the pages it links to, each a
    plain file."""
    strangers = not_pages(directory)
    if not strangers:
        return
    shown = [name if name.isprintable() else ascii(name) for name in strangers[:SHOWN]]
    more = f" and {len(strangers) - SHOWN:,} more" if len(strangers) > SHOWN else ""
    raise PluginError(
        f"{named} holds files that are not an earlier fleet's pages: {', '.join(shown)}{more}; "
        "give a new or empty directory, or move them out; nothing was written"
    )


def not_pages(directory: Path) -> list[str]:
    """What in ``directory`` is not an earlier fleet's page (a directory shown with its
    ``/``), sorted; every entry when it holds no index of ours."""
    entries = sorted(os.listdir(directory))
    if not entries:
        return []
    pages = _earlier_pages(directory / INDEX)
    found = []
    for name in entries:
        path = directory / name
        plain = path.is_file() and not path.is_symlink()
        if pages is None or (name != INDEX and name not in pages) or not plain:
            found.append(f"{name}/" if path.is_dir() and not path.is_symlink() else name)
    return found


_LINKED = re.compile(r'<a href="([^"#]+)"')
"""A link of the index's (to a node's page: ``fleet_page``'s rows), as written: quoted."""


def _is_page(name: str) -> bool:
    """Whether ``name`` is one :func:`page_name` writes."""
    return name.startswith(("node-", "node=")) and name.endswith(".html") and "/" not in name


def _earlier_pages(index: Path) -> set[str] | None:
    """The pages an index of ours links to; None when ``index`` is no fleet's index."""
    if index.is_symlink():
        return None
    try:
        text = index.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if f'<meta name="generator" content="{fleet_page.GENERATOR}">' not in text[:256]:
        return None
    return {name for name in map(unquote, _LINKED.findall(text)) if _is_page(name)}


def _page(
    session: Session[Struct],
    node: Listed,
    archive: Archive,
    staging: Path,
    pages: dict[str, str],
) -> fleet_page.Node:
    """Write ``node``'s life page into ``staging``; its row in the index. ``pages``: the nodes
    written so far, by page, none of which may share one."""
    try:
        positions = positions_of(session, node.name)
        first = positions.at_or_after(positions.first) if positions.first else None
        page = life.gather(session, node.name, positions, first, Selection(), archive)
    except PluginError as exc:  # its page and its row say why, and the fleet goes on
        page = life.unread(session, node.name, exc.reason)
    finally:
        session.node = None  # what fails from here on is the fleet's, not this node's
    name = page_name(node.name)
    if name.casefold() in pages:  # another's page, on a file system that folds case
        name = page_name(node.name, by_digest=True)
    taken = pages.setdefault(name.casefold(), node.name)
    if taken != node.name:  # (two digests alike: never met)
        raise PluginError(
            f"nodes {taken} and {node.name} would share one page, {name}: select one of them "
            "with --match; nothing was written"
        )
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


def page_name(node: str, *, by_digest: bool = False) -> str:
    """The file of ``node``'s page: its name made safe for a file (``node-gpu-1.html``), or,
    for a name too long once quoted (or ``by_digest``), its digest after a ``=``, which
    ``quote`` never writes (``node=5e1f….html``): no node's name can be another's digest."""
    quoted = quote(node, safe="")
    if by_digest or len(quoted) > 200:
        return f"node={hashlib.sha256(node.encode()).hexdigest()[:32]}.html"
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
        old = aside / "pages"
        try:
            os.rename(target, old)
        except OSError:
            aside.rmdir()
            raise
        try:  # and what was moved: nothing put in DIR since the check goes with the pages
            refuse_strangers(old, target)
            os.rename(staging, target)
        except (OSError, PluginError):
            os.rename(old, target)  # (should this fail too, the old pages stay in aside)
            aside.rmdir()
            raise
        shutil.rmtree(aside, ignore_errors=True)
        return
    os.rename(staging, target)
