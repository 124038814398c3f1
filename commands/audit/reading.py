"""What the auditor commands (``history``, ``show``, ``history --html``) share: the points they
take (``--since``, ``--until``, ``--at``), a node's stream to read by position, and how one event
reads to people."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import click
from msgspec import Struct

from resource_extend.commands.protocol import Session
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.errors import InvalidRequest, PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint, HeadRepaired
from resource_extend.ledger.model.names import check_node_name
from resource_extend.ledger.store.positions import Positions

if TYPE_CHECKING:
    from resource_extend.projections.parts import KindView


POINT_HELP = "a seq (42) or an RFC 3339 time (2026-11-29T03:00:00Z; no offset means UTC)"


def point_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> audit.Point | None:
    """``--since``, ``--until``, ``--at`` (a click callback): a point not understood is a usage
    error (exit 2), said before anything is read."""
    try:
        return None if value is None else audit.parse_point(value)
    except InvalidRequest as exc:
        raise click.BadParameter(exc.reason, ctx, param) from None


def summary(view: KindView, event: Event) -> str:
    """What one event did, in a few words: the ledger's own changes here, the kind's by its
    view."""
    change = event.change
    if isinstance(change, Checkpoint):
        by = f" by {event.by}" if event.by else ""
        return (
            f"compacted at {audit.rfc3339(event.at)}{by}: stands for events {change.first}.."
            f"{event.seq} (the last written {audit.rfc3339(change.last_at)}), exported to "
            f"{change.export}"
        )
    if isinstance(change, HeadRepaired):
        return f"head rewritten from the stream; it was: {change.found}"
    said = view.summary(change)
    return repr(change) if said is None else said


class Listed(NamedTuple):
    """One node as ``nodes`` lists it (and ``nodes --html`` writes its pages)."""

    name: str
    status: str
    state: Struct | None
    """The head's state (``None``: no head, or one that cannot be read)."""
    events: int
    seq: int


NOT_ADOPTED = (
    "no events yet: the record was written by the upstream plugin; it is adopted (as event 1) "
    "on its first write"
)


def positions_of(session: Session[Struct], node: str) -> Positions[Struct]:
    """The node's stream, to read by position (empty for an upstream record not adopted
    yet); an error if the plugin has never known the node."""
    session.node = check_node_name(node)
    session.store.etcd.budget_per_request()  # an auditor's read may be long; no request may be
    found: Positions[Struct] = Positions(session.store, node)
    if not found.first and found.head is None:
        raise PluginError("no events: the plugin has never known this node")
    return found
