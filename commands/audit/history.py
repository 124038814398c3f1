"""``history`` and ``export``: a node's events, for auditors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.audit.archive import archive_dir, archive_option
from resource_extend.commands.audit.reading import (
    NOT_ADOPTED,
    POINT_HELP,
    point_option,
    positions_of,
    summary,
)
from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.tables import columns, terminal_width
from resource_extend.commands.under_click import answered, click_plugin
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.names import check_node_name
from resource_extend.ledger.upkeep.export import json_lines
from resource_extend.ledger.upkeep.history import Archive, Selection, selected

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from resource_extend.projections.parts import KindView


def as_json(event: Event) -> dict[str, Any]:
    """An event as auditors' tools read it: the envelope, ``kind``, and the change (and the
    node record written with it, as stored, for an event that carries one)."""
    data: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(event))  # a Raw snapshot
    return {"seq": event.seq, "kind": event.kind, **data}


def table(view: KindView, rows: list[tuple[Event, Struct | None]]) -> str:
    """Events with the state after each (``None``: no node); on a terminal, the states and
    changes wrapped to its width."""
    after = tuple(f"{header} AFTER" for header in view.STATE_HEADERS)
    lines = [("SEQ", "AT (UTC)", "VERB", "KIND", *after, "CHANGE")]
    for event, state in rows:
        when = audit.rfc3339(audit.written_at(event))  # a checkpoint's: its last event's
        cells = view.state_cells(state)
        lines.append((str(event.seq), when, event.verb, event.kind, *cells, summary(view, event)))
    return columns(lines, terminal_width(), wrap=range(4, 5 + len(after)))


class ChangeKind(click.ParamType):  # type: ignore[type-arg]  # generic in newer click
    """A change kind of the program's own (``history --kind``): which kinds there are is the
    running program's to say, so this is a ``click.Choice`` of them, decided when the command
    is shown or run (one command serves both programs)."""

    name = "kind"

    def choice(self, ctx: click.Context | None) -> click.Choice[str]:
        return click.Choice(click_plugin(ctx).parts.view.KINDS if ctx is not None else [])

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str | None:
        return self.choice(ctx).get_metavar(param, ctx)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return self.choice(ctx).convert(value, param, ctx)

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        return self.choice(ctx).shell_complete(ctx, param, incomplete)


@click.command("history")
@click.argument("node")
@click.option(
    "--since", callback=point_option, metavar="POINT", help=f"From this event on: {POINT_HELP}."
)
@click.option(
    "--until",
    callback=point_option,
    metavar="POINT",
    help="Up to this event, included (same forms).",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=ChangeKind(),
    help="Only events of this kind (repeat for several).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Only the newest N of the events selected."
)
@archive_option
@click.option("--json", "as_json_output", is_flag=True, help="Print a JSON array, oldest first.")
@click.option(
    "--html",
    "page_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE",
    help=(
        "Write the events as one HTML page to FILE instead (-: print it): capacity and usage "
        "as step charts over time, every event marked (its words on hover) and listed, and "
        "verify's verdict at the top. Self-contained: it opens offline, and prints."
    ),
)
@answered
def history(
    session: Session[Struct],
    node: str,
    since: audit.Point | None,
    until: audit.Point | None,
    kinds: tuple[str, ...],
    limit: int | None,
    archive: str | None,
    as_json_output: bool,
    page_file: str | None,
) -> Answer:
    """Print NODE's events, oldest first: when, which verb, what changed, and the capacity and
    usage after each.

    \b
    Each event has: seq (1, 2, 3, ...), at (RFC 3339, UTC), verb (the core verb or auditor
    command that caused it), op (the operation id of that call), by (user@host), kind, the
    change itself, and v (its schema version).

    A compacted stream starts with a checkpoint: the state after the events it replaced, and
    the export file those events were written to. Given the archive (--archive DIR, or
    streams.archive_dir), the events before it are read from there, back to event 1: the
    node's whole life. Filters never change the capacity and usage shown: those are always
    folded from the start.

    \b
    With --html FILE, the same events make a page for an audit record:
      {prog} history n1 --since 2026-11-01T00:00:00Z --html n1.html
    The charts follow every event from the first selected to the last (--kind picks the
    events marked and listed); compactions, fixes, repairs, adoption and removal are ruled
    across them.
    """
    if page_file is not None and as_json_output:
        raise click.UsageError("--json and --html each say where the events go: give one")
    positions = positions_of(session, node)
    first = positions.at_or_after(positions.first) if positions.first else None
    select = Selection(since, until, kinds, limit)
    archived = Archive(archive_dir(session, archive), named=bool(archive))
    if page_file is not None:
        from resource_extend.commands.audit import life

        page = life.gather(session, node, positions, first, select, archived)
        return life.write(session, page, page_file)
    if first is None:
        return [] if as_json_output else NOT_ADOPTED
    rows = selected(session.kind, positions, first, select, archived)
    if as_json_output:
        return [as_json(e) for e, _ in rows]
    return table(session.view, rows) if rows else "no events match"


@click.command("export")
@click.argument("node")
@answered
def export(session: Session[Struct], node: str) -> Answer:
    """Print NODE's whole stream as JSON lines: one event per line, exactly as stored (each
    line decodes as an event, schema version included).

    \b
    Keep it before compacting by hand:
      {prog} export n1 > n1.jsonl && {prog} compact n1 --keep 100 --export-dir DIR
    (compact also writes the events it removes to DIR first). A compacted stream starts with
    its checkpoint, which names the export holding the events before it.
    """

    session.node = check_node_name(node)
    stored = session.store.streams.stored_events(node)  # as stored: one bad event is printed too
    if not stored:
        positions_of(session, node)  # the reason: never known, or upstream's not adopted
        raise PluginError(NOT_ADOPTED)
    return json_lines(stored).decode(errors="replace").rstrip("\n")
