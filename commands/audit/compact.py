"""``compact``: bound event streams by hand, exporting what goes."""

from __future__ import annotations

import os
import shlex

import click
from msgspec import Struct

from resource_extend.commands.audit.verify import named_nodes, nodes_or_all
from resource_extend.commands.protocol import Answer, Session, report_failure, respond
from resource_extend.commands.under_click import answered, with_progress
from resource_extend.ledger.host.config import Destination
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.counts import plural
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep.compaction import compact as compact_node


@click.command("compact")
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("--all", "every", is_flag=True, help="Every node under the prefix.")
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    required=True,
    help="How many of the newest events stay as they are.",
)
@click.option(
    "--min-age",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help=(
        "Events younger than this, by this host's clock, stay too, with everything after them "
        "(default: streams.min_age, itself 300 by default). A core call whose answer was lost "
        "looks for its own event among the recent ones: compacted away, its outcome could "
        "only be reported as unknown. 0: events of any age go."
    ),
)
@click.option(
    "--export-dir",
    metavar="DIR",
    help=(
        "Where the removed events are written first, named host:path (default: the archive, "
        "streams.archive_dir, named archive:<file>; else streams.export_dir)."
    ),
)
@answered
def compact(
    session: Session[Struct],
    nodes: tuple[str, ...],
    every: bool,
    keep: int,
    min_age: float | None,
    export_dir: str | None,
) -> Answer:
    """Bound event streams: replace all but the newest --keep events by one checkpoint.

    \b
    For each node: the events to go are written to DIR as JSON lines
    (<node>.<first>-<last>.<op>.jsonl, named <...>.jsonl.partial until the checkpoint is in),
    then one transaction puts a checkpoint event, holding the full state and the export's
    host:path, in place of the newest of them and deletes the rest.

    Events younger than --min-age stay whatever --keep says, and so does everything after the
    first of them: a core call whose answer was lost settles it by finding its own event among
    the recent ones. Both are judged as the compaction begins: what is written, or comes of
    age, while it runs waits for the next one, so it ends however busy the node.

    Compactions of one node may run at once (by hand, and after writes with
    streams.max_events): of those that start from the same first event only one commits, and
    the others start again from its checkpoint. So every removed event is in exactly one
    export, and every export is named by a checkpoint; verify checks them back to event 1.

    Of several nodes (--all), what was compacted is printed; each node that could not be is
    named on stderr with why (its events stay), the others go on, and the exit status is 1.

    history, show --at and verify start from the checkpoint, or with --archive read the
    archive back to event 1. Streams are bounded as they grow (streams.budget and
    streams.max_events in {config}); "{prog} archive" keeps them at half their bound.
    """
    nodes_or_all(nodes, every)
    streams = session.config.streams
    to = destination(export_dir, streams.destination)
    age = streams.min_age if min_age is None else min_age
    store = session.store
    store.etcd.budget_per_request()  # many nodes outlast one call's budget; no request may
    lines = []
    targets = named_nodes(store, nodes, every)
    failed: list[tuple[str, str]] = []
    with with_progress(targets, "compacting") as walked:
        for node in walked:
            try:
                lines.append(f"node {node}: {compacted(store, node, keep, to, age)}")
            except PluginError as exc:  # the others are still compacted, and all reported
                if len(targets) == 1:
                    raise PluginError(exc.reason, node=node) from None
                failed.append((node, exc.reason))
    if failed:  # what was compacted on stdout; each node that was not on stderr, with why
        if lines:
            respond("\n".join(lines), text=True, io=session.io)
        for node, why in failed:
            report_failure(
                session.plugin.name, "compact", node, f"not compacted: {why}", session.io
            )
        raise PluginError(f"{len(failed)} of {plural(len(targets), 'node')} not compacted")
    return "\n".join(lines)


def destination(export_dir: str | None, configured: Destination) -> Destination:
    """Where the exports go: ``--export-dir``, which must exist (a directory named by hand is
    never made, so that a typo fails), else the config's; a PluginError when there is none."""
    to = Destination(export_dir) if export_dir else configured
    if export_dir and not os.path.isdir(os.path.expanduser(export_dir)):
        raise PluginError(
            f"--export-dir {export_dir!r} is not a directory: create it first "
            f"(mkdir -p {shlex.quote(export_dir)}); a directory named by hand is never made, so "
            "that a typo fails; nothing was compacted"
        )
    if not to.directory:
        raise PluginError(
            "no export directory: pass --export-dir, or set streams.archive_dir or "
            "streams.export_dir"
        )
    return to


def compacted(store: Store[Struct], node: str, keep: int, to: Destination, age: float) -> str:
    """Compact one node; what came of it, for its line."""
    done = compact_node(store, node, keep=keep, to=to, min_age=age)
    if done is None:
        return "nothing to compact"
    steps = f" ({done.steps} steps, an export each)" if done.steps > 1 else ""
    return f"{audit.compacted_note(done.checkpoint)}{steps}"
