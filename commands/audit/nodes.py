"""``nodes``: every node the plugin knows, its state and its stream, for auditors."""

from __future__ import annotations

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.audit.foreign import report_foreign
from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.tables import columns
from resource_extend.commands.under_click import answered, with_progress
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.events import Checkpoint, HeadRepaired
from resource_extend.projections.changes import NodeRemoved


@click.command("nodes")
@click.option("--json", "as_json_output", is_flag=True, help="Print a JSON array of objects.")
@answered
def nodes(session: Session[Struct], as_json_output: bool) -> Answer:
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
    report_foreign(store.scans, "nodes")
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


def _exists_after(kind: Kind[Struct], tail: bytes | None) -> bool:
    """Whether a stream ending with ``tail`` (its last event as stored) says the node exists;
    ``msgspec.DecodeError`` when that event cannot be read."""
    if tail is None:
        return False
    change = kind.events.decode(tail).change
    if isinstance(change, Checkpoint | HeadRepaired):
        return change.state is not None
    return not isinstance(change, NodeRemoved)
