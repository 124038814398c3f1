"""``footprint``: how much of etcd the plugin's keys take, and how full etcd is."""

from __future__ import annotations

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.tables import columns
from resource_extend.commands.under_click import answered
from resource_extend.ledger.etcd.choice import choose, described
from resource_extend.ledger.upkeep.bounds import EVENT_BYTES, bound_for
from resource_extend.ledger.upkeep.footprint import etcd_footprint, measure


@click.command("footprint")
@click.option("--top", default=10, show_default=True, help="How many of the largest streams.")
@click.option("--json", "as_json_output", is_flag=True, help="Print one JSON object.")
@answered
def footprint(session: Session[Struct], top: int, as_json_output: bool) -> Answer:
    """Show the plugin's share of etcd: its keys and bytes (node records and event streams),
    its largest streams, and the size of etcd's database against what is in use.

    \b
    Bytes are the keys' and values' own; etcd's file is larger (old revisions until etcd
    compacts them, free pages until it is defragmented). Etcd refuses every write, core's
    included, once its file reaches --quota-backend-bytes (2 GiB by default): it raises its
    NOSPACE alarm, listed here. Plain range reads only, so this answers while the alarm is
    raised. Also shown: the bound each stream is held to (streams.budget, streams.max_events)
    and how much of the budget the events count for, and which transport this command and
    core's calls take (etcd.transport), and why. --json prints
    {"etcd": {...}, "transport": {...}, "plugin": {...}, "streams": {...}}.
      {prog} footprint --top 20
    """

    store, streams = session.store, session.config.streams
    store.etcd.budget_per_request()  # a long stream is many pages: each has etcd.timeout
    etcd, mine = etcd_footprint(store.etcd), measure(store.etcd, store.keys, top)
    this = choose(session.config.etcd.transport, scan=True)
    calls = described(session.config.etcd.transport, resident=session.config.resident)
    bound = bound_for(streams, mine.head_keys)
    counted = mine.event_keys * EVENT_BYTES
    if as_json_output:
        policy = {
            "budget": streams.budget,
            "max_events": streams.max_events,
            "bound": bound.keep if bound else None,
            "counted": counted,
        }
        return {
            "etcd": msgspec.to_builtins(etcd),
            "transport": {"this command": this._asdict(), "core's calls": calls},
            "plugin": msgspec.to_builtins(mine),
            "streams": policy,
        }
    alarms = ", ".join(etcd.alarms) or "none"
    in_use = "?" if etcd.db_size_in_use is None else _size(etcd.db_size_in_use)
    lines = [
        f"etcd {etcd.member} ({etcd.version}): database {_size(etcd.db_size)}, "
        f"{in_use} in use; alarms: {alarms}",
        f"read over {'gRPC' if this.transport == 'grpc' else 'HTTP'} ({this.why}); {calls}",
        f"{mine.kind} under {mine.prefix}: {mine.nodes} nodes, "
        f"{mine.head_keys + mine.event_keys} keys, "
        f"{_size(mine.head_bytes + mine.event_bytes)} "
        f"(records {mine.head_keys} keys {_size(mine.head_bytes)}; "
        f"events {mine.event_keys} keys {_size(mine.event_bytes)})",
    ]
    if bound is None:
        lines.append("streams are unbounded (streams.budget and streams.max_events are 0)")
    else:
        budget = streams.budget
        share = f", {100 * counted / budget:.0f}% of streams.budget {_size(budget)}"
        lines.append(
            f"each stream is held to {bound.keep} events; they count {_size(counted)} at "
            f"{EVENT_BYTES} B an event{share if budget else ''}"
        )
    if mine.largest:
        rows = [("NODE", "EVENTS", "BYTES")]
        rows += [(s.node, str(s.events), _size(s.bytes)) for s in mine.largest]
        lines += ["largest streams:", columns(rows)]
    return "\n".join(lines)


def _size(size: int) -> str:
    """Bytes for people: ``512 B``, ``1.5 KiB``, ``2.00 GiB``."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.2f} {unit}"
    return f"{size} B"
