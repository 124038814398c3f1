"""``migrate``: move event streams from release 0.1's layout to this release's."""

from __future__ import annotations

import click
from msgspec import Struct

from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.under_click import answered, with_progress
from resource_extend.ledger.store import migration


@click.command("migrate")
@click.option("--dry-run", is_flag=True, help="Only list the nodes to migrate and their events.")
@click.option(
    "--json",
    "as_json_output",
    is_flag=True,
    help='Print {"nodes": {"<node>": <events moved>}, "events": N, "dry_run": B}.',
)
@answered
def migrate(session: Session[Struct], dry_run: bool, as_json_output: bool) -> Answer:
    """Move the GPU event streams written by resource-gpu 0.1 to where this release keeps them
    (resource-storage never wrote that layout: it finds nothing to move).

    \b
    0.1     <prefix>/resource/gpu/<node>/events/<seq>   (under the node record)
    now     <prefix>/resource-events/gpu/<node>/<seq>   (a prefix of their own)

    so that <prefix>/resource/gpu/ holds the node records and nothing else, as with the
    upstream plugin. Each transaction moves up to 127 events of a node, oldest first (a put
    each, byte for byte, and one delete), with compare-and-swap: every event is in exactly
    one of the two places at every moment. So migrate may be killed at any point and run
    again (it carries on), and may run while core keeps calling the plugin: a write to a node
    not moved yet moves its stream first, or fails asking for migrate when the stream is
    long. Streams are read by nobody until moved (history and verify name migrate).

    \b
    Afterwards:  {prog} verify --all
    """

    store = session.store
    moved: dict[str, int] = {}
    with with_progress(migration.legacy_nodes(store.scans), "migrating") as walked:
        for node in walked:
            session.node = node
            if dry_run:
                moved[node] = migration.legacy_count(store.etcd, store.keys, node)
            else:
                moved[node] = migration.migrate_node(
                    store.etcd, store.keys, node, before_batch=store.etcd.renew
                )
            session.node = None
    total = sum(moved.values())
    if as_json_output:
        return {"nodes": moved, "events": total, "dry_run": dry_run}
    verb = "to move" if dry_run else "moved"
    lines = [f"node {node}: {count} events {verb}" for node, count in moved.items()]
    if not moved:
        lines.append("nothing to migrate: every stream is in this release's layout")
    elif dry_run:
        lines.append(f"{len(moved)} nodes, {total} events to move (nothing was changed)")
    else:
        lines.append(
            f"migrated {len(moved)} nodes, {total} events; check with: "
            f"{session.kind.program} verify --all"
        )
    return "\n".join(lines)
