"""``show``: what a node holds, now or at an earlier point, for auditors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from msgspec import Struct

from resource_extend.commands.audit.archive import archive_dir, archive_option
from resource_extend.commands.audit.reading import (
    NOT_ADOPTED,
    POINT_HELP,
    point_option,
    positions_of,
)
from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.tables import columns, terminal_width
from resource_extend.commands.under_click import answered
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.upkeep.chain import state_in_archive

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
    session: Session[Struct],
    node: str,
    point: audit.Point | None,
    archive: str | None,
    as_json_output: bool,
) -> Answer:
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
        ],
        terminal_width(),
        wrap=range(2, 2 + len(view.DETAIL_HEADERS)),
    )


def archived(
    session: Session[Struct], first: Event, point: audit.Point, archive: str | None
) -> tuple[Event, Struct | None]:
    """The event at ``point``, before the stream's ``first``, and the state after it, from the
    archive (``--archive``, which must hold it, or ``streams.archive_dir``, read if it does);
    else the error that says where it went."""
    exports = archive_dir(session, archive)
    if not exports or not isinstance(first.change, Checkpoint):
        raise audit.before_first(first, point)

    try:
        return state_in_archive(session.kind, first, exports, point)
    except PluginError:
        if archive:
            raise
        raise audit.before_first(first, point) from None


def seq_of(positions: Positions[Struct], point: audit.Point | None) -> int | None:
    """The seq ``point`` names in the stream (by default its last); None when it is before
    the stream's first event."""
    if point is None:
        return positions.last
    if isinstance(point, int):
        if point > positions.last:
            raise PluginError(f"seq {point} is past the end of the stream (seq {positions.last})")
        return point if point >= positions.first else None
    return positions.seq_at(point)
