"""``show`` and ``nodes``: what nodes hold, now or at an earlier point, for auditors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import msgspec

from resource_extend.commands.audit.archive import archive_dir, archive_option
from resource_extend.commands.audit.history import (
    NOT_ADOPTED,
    POINT_HELP,
    columns,
    point_option,
    positions_of,
)
from resource_extend.commands.protocol import Session, answered
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint, HeadRepaired
from resource_extend.ledger.model.kinds import Kind
from resource_extend.projections.changes import NodeRemoved

if TYPE_CHECKING:
    from resource_extend.ledger.store.positions import Positions


@click.command("show")
@click.argument("node")
@click.option(
    "--at", "point", callback=point_option, metavar="POINT", help=f"As of this point: {POINT_HELP}."
)
@archive_option
@click.option(
    "--json",
    "as_json_output",
    is_flag=True,
    help='Print {"capacity": R, "usage": R, "seq": N} instead of a table.',
)
@answered
def show(
    session: Session,
    node: str,
    point: audit.Point | None,
    archive: str | None,
    as_json_output: bool,
) -> Any:
    """Print NODE's capacity and usage now, or as of an earlier point, folded from its events.

    \b
    {prog} show n1                           # now
    {prog} show n1 --at 42                   # after event 42
    {prog} show n1 --at 2026-11-29T03:00:00Z # after the last event written by then

    A point before the stream's checkpoint was compacted away: given the archive (--archive
    DIR, or streams.archive_dir) it is read from there; otherwise the error names the export
    that holds it. A point where the node did not exist is an error too.
    """

    positions = positions_of(session, node)
    first = positions.at_or_after(positions.first) if positions.first else None
    if first is None:
        raise PluginError(NOT_ADOPTED)
    seq = seq_of(positions, point)
    if seq is None:
        assert point is not None
        event, after = archived(session, first, point, archive)
    else:
        found = list(positions.rows(seq - 1, seq))
        if not found:
            raise PluginError(
                f"event {seq} is missing from the stream (see: {session.kind.program} "
                f"verify {node})"
            )
        event, after = found[0]
    if after is None:
        raise PluginError(f"the node did not exist after seq {event.seq} ({event.kind})")
    view = session.view
    if as_json_output:
        return {**view.state_json(after), "seq": event.seq}
    when = audit.rfc3339(audit.written_at(event))  # a checkpoint: its last event's
    return columns(
        [
            ("SEQ", "AT (UTC)", *view.DETAIL_HEADERS),
            (str(event.seq), when, *view.detail_cells(after)),
        ]
    )


def archived(
    session: Session, first: Event, point: audit.Point, archive: str | None
) -> tuple[Event, Any]:
    """The event at ``point``, before the stream's ``first``, and the state after it, from the
    archive (``--archive``, which must hold it, or ``streams.archive_dir``, read if it does);
    else the error that says where it went."""
    exports = archive_dir(session, archive)
    if not exports or not isinstance(first.change, Checkpoint):
        raise audit.before_first(first, point)
    from resource_extend.ledger.upkeep.chain import state_in_archive

    try:
        return state_in_archive(session.kind, first, exports, point)
    except PluginError:
        if archive:
            raise
        raise audit.before_first(first, point) from None


def seq_of(positions: Positions[Any], point: audit.Point | None) -> int | None:
    """The seq ``point`` names in the stream (by default its last); None when it is before
    the stream's first event."""
    if point is None:
        return positions.last
    if isinstance(point, int):
        if point > positions.last:
            raise PluginError(f"seq {point} is past the end of the stream (seq {positions.last})")
        return point if point >= positions.first else None
    return positions.seq_at(point)


@click.command("nodes")
@click.option("--json", "as_json_output", is_flag=True, help="Print a JSON array of objects.")
@answered
def nodes(session: Session, as_json_output: bool) -> Any:
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
    """

    store, view = session.store, session.view
    known, heads = store.scans.survey()
    names = sorted(known)
    streams = [n for n in names if known[n].stream and not known[n].legacy]
    headless = {n for n in streams if n not in heads}
    bounds = store.scans.stream_bounds(streams, tails=headless)
    rows, shown = [], []
    for name in names:
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
        shown.append(view.state_cells(view.EMPTY if state is None else state))
        rows.append(
            {
                "nodename": name,
                "state": status,
                **view.state_json(state),
                "events": stream.count if stream else 0,
                "seq": stream.last if stream else 0,
            }
        )
    if as_json_output:
        return rows
    return columns(
        [
            ("NODE", "STATE", *view.STATE_HEADERS, "EVENTS", "SEQ"),
            *(
                (row["nodename"], row["state"], *cells, str(row["events"]), str(row["seq"]))
                for row, cells in zip(rows, shown, strict=True)
            ),
        ]
    )


def _exists_after(kind: Kind[Any], tail: bytes | None) -> bool:
    """Whether a stream ending with ``tail`` (its last event as stored) says the node exists;
    ``msgspec.DecodeError`` when that event cannot be read."""
    if tail is None:
        return False
    change = kind.events.decode(tail).change
    if isinstance(change, Checkpoint | HeadRepaired):
        return change.state is not None
    return not isinstance(change, NodeRemoved)
