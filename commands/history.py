"""``history``: a node's events, for auditors."""

from __future__ import annotations

from typing import Any

import click
import msgspec

from commands.protocol import Session, run
from ledger import cards
from ledger.errors import PluginError
from ledger.events import (
    Adopted,
    CapacityChanged,
    CapacitySet,
    Change,
    Event,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from ledger.keys import check_node_name
from projections.node import NodeState, apply


def _signed(delta: cards.Cards) -> str:
    return ", ".join(f"{p}:{n:+d}" for p, n in sorted(delta.items())) or "none"


def summary(change: Change) -> str:
    """What one change did, in a few words."""
    if isinstance(change, NodeAdded):
        return f"capacity = {cards.describe(change.capacity)}"
    if isinstance(change, (Adopted, NodeInfoSet)):
        return (
            f"capacity = {cards.describe(change.capacity)}; usage = {cards.describe(change.usage)}"
        )
    if isinstance(change, CapacitySet):
        return f"capacity = {cards.describe(change.capacity)}"
    if isinstance(change, CapacityChanged):
        return f"capacity {_signed(change.delta)}"
    if isinstance(change, UsageChanged):
        count = len(change.workloads or [])
        workloads = f" ({count} workload{'s' * (count != 1)})" if count else ""
        return f"usage {_signed(change.delta)}{workloads}"
    if isinstance(change, UsageSet):
        return f"usage = {cards.describe(change.usage)}"
    if isinstance(change, UsageRebuilt):
        return f"usage = {cards.describe(change.usage)}; diffs: {'; '.join(change.diffs)}"
    if isinstance(change, NodeRemoved):
        return "node removed"
    return repr(change)


def as_json(event: Event) -> dict[str, Any]:
    """An event as auditors' tools read it: the envelope, ``kind``, and the change."""
    data: dict[str, Any] = msgspec.to_builtins(event)
    return {"seq": event.seq, "kind": event.kind, **data}


def table(events: list[Event]) -> str:
    rows = [("SEQ", "AT (UTC)", "VERB", "KIND", "CAPACITY AFTER", "USAGE AFTER", "CHANGE")]
    state: NodeState | None = None
    for event in events:
        state = apply(state, event.change)
        rows.append(
            (
                str(event.seq),
                event.at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                event.verb,
                event.kind,
                cards.describe(state.capacity) if state else "-",
                cards.describe(state.usage) if state else "-",
                summary(event.change),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    widths[-1] = 0  # the last column is not padded
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


@click.command("history")
@click.argument("node")
@click.option("--json", "as_json_output", is_flag=True, help="Print a JSON array, oldest first.")
def history(node: str, as_json_output: bool) -> None:
    """Print NODE's events, oldest first: when, which verb, what changed, and the capacity and
    usage after each.

    \b
    Each event has: seq (1, 2, 3, ...), at (RFC 3339, UTC), verb (the core verb that caused
    it), op (the operation id of that call), kind, and the change itself.
    """

    def show(session: Session) -> Any:
        session.node = node
        events = session.store.events(check_node_name(node))
        if not events:
            record = session.store.read(node)
            if record.state is None:
                raise PluginError("no events: the plugin has never known this node")
            if not as_json_output:
                return (
                    "no events yet: the record was written by the upstream plugin; "
                    "it is adopted (as event 1) on its first write"
                )
        if as_json_output:
            return [as_json(e) for e in events]
        return table(events)

    run("history", show, text=not as_json_output)
