"""``nodes``: every node the plugin knows, its state and its stream, for auditors; with
``--html``, the fleet as pages (``fleet``)."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.audit.archive import archive_dir, archive_option
from resource_extend.commands.audit.foreign import report_foreign
from resource_extend.commands.audit.reading import Listed
from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.tables import columns, terminal_width
from resource_extend.commands.under_click import answered, with_progress
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.events import Checkpoint, HeadRepaired
from resource_extend.ledger.upkeep.history import Archive
from resource_extend.projections.changes import NodeRemoved


@click.command("nodes")
@click.option(
    "--match",
    "patterns",
    multiple=True,
    metavar="GLOB",
    help="Only nodes whose name matches GLOB (gpu-*, rack[12]-*; repeat for several).",
)
@archive_option
@click.option("--json", "as_json_output", is_flag=True, help="Print a JSON array of objects.")
@click.option(
    "--html",
    "directory",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help=(
        "Write the fleet as pages to DIR instead: index.html, a row a node (its usage as a bar "
        "per product or volume, verify's verdict, its last change, its events; full nodes and "
        "those that disagree first), each linked to the node's own page beside it."
    ),
)
@answered
def nodes(
    session: Session[Struct],
    patterns: tuple[str, ...],
    archive: str | None,
    as_json_output: bool,
    directory: str | None,
) -> Answer:
    """List every node the plugin knows: its capacity, usage and event stream.

    \b
    STATE is live (a head and its stream), removed (only a stream, ending with the node
    removed: remove-node keeps it), head missing (only a stream, which says the node exists:
    its head was deleted outside the plugin; see verify NODE), upstream (a record of the
    upstream plugin, adopted on its first write), unreadable (the head is not valid JSON:
    see verify --repair; or, with no head, the stream's last event cannot be read: see
    verify NODE), or 0.1-layout (its stream is where release 0.1 kept it: see migrate).
    One paged range reads every head; of a stream with no head, only its last event is
    read. EVENTS is the stream's length (a compacted stream counts its checkpoint), SEQ its
    last event.
    --json prints [{"nodename", "state", "capacity": R, "usage": R, "events", "seq"}, ...]
    sorted by name.

    \b
    With --html DIR, the fleet becomes pages for an audit record:
      {prog} nodes --match 'gpu-*' --html fleet/
    DIR is made (its parent must exist), or replaces an earlier fleet's pages there; it is
    written whole or not at all. A fleet of more than 2,000 nodes or 200,000 events is
    refused: select fewer with --match.
    """
    if directory is not None and as_json_output:
        raise click.UsageError("--json and --html each say where the nodes go: give one")
    if archive is not None and directory is None:
        raise click.UsageError("--archive is for the pages --html writes (their verdicts)")
    listed = survey(session, patterns)
    if directory is not None:
        from resource_extend.commands.audit import fleet

        named = Archive(archive_dir(session, archive), named=bool(archive))
        return fleet.write(session, listed, named, directory, patterns)
    view = session.view
    rows = [
        {
            "nodename": node.name,
            "state": node.status,
            **view.state_json(node.state),
            "events": node.events,
            "seq": node.seq,
        }
        for node in listed
    ]
    if as_json_output:
        return rows
    return columns(
        [
            ("NODE", "STATE", *view.STATE_HEADERS, "EVENTS", "SEQ"),
            *(
                (
                    node.name,
                    node.status,
                    *view.state_cells(view.EMPTY if node.state is None else node.state),
                    str(node.events),
                    str(node.seq),
                )
                for node in listed
            ),
        ],
        width=terminal_width(),
        wrap=range(2, 2 + len(view.STATE_HEADERS)),
    )


def survey(session: Session[Struct], patterns: Sequence[str] = ()) -> list[Listed]:
    """Every node under the prefix (those ``patterns`` match, if any), sorted by name: one
    paged range of the heads, and the last event of each stream without one."""
    store = session.store
    known, heads = store.scans.survey()
    names = sorted(
        name for name in known if not patterns or any(fnmatchcase(name, p) for p in patterns)
    )
    streams = [n for n in names if known[n].stream and not known[n].legacy]
    headless = {n for n in streams if n not in heads}
    bounds = store.scans.stream_bounds(streams, tails=headless)
    listed = []
    with with_progress(names, "reading nodes") as walked:
        for name in walked:
            raw = heads.get(name)
            stream = bounds.get(name)
            try:
                state = store.kind.read_head(raw).state if raw is not None else None
                status = "live" if stream else "upstream"
                if raw is None:
                    tail = stream.tail if stream else None
                    status = "head missing" if _exists_after(store.kind, tail) else "removed"
            except msgspec.DecodeError:
                state, status = None, "unreadable"
            if known[name].legacy:
                status = "0.1-layout"
            events, seq = (stream.count, stream.last) if stream else (0, 0)
            listed.append(Listed(name, status, state, events, seq))
    report_foreign(store.scans, "nodes")
    return listed


def _exists_after(kind: Kind[Struct], tail: bytes | None) -> bool:
    """Whether a stream ending with ``tail`` (its last event as stored) says the node exists;
    ``msgspec.DecodeError`` when that event cannot be read."""
    if tail is None:
        return False
    change = kind.events.decode(tail).change
    if isinstance(change, Checkpoint | HeadRepaired):
        return change.state is not None
    return not isinstance(change, NodeRemoved)
