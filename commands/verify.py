"""``verify`` and ``compact``: check heads against their streams, and keep streams bounded."""

from __future__ import annotations

import click

from commands.protocol import Session, click_config, respond, run
from ledger.errors import PluginError
from ledger.keys import check_node_name
from ledger.store import Store
from projections import audit

REPAIR_ATTEMPTS = 5


def _targets(store: Store, nodes: tuple[str, ...], every: bool, which: str) -> list[str]:
    if every == bool(nodes):
        raise PluginError(f"name the nodes to {which}, or pass --all (not both)")
    if every:
        return sorted(store.list_nodes())
    return [check_node_name(node) for node in dict.fromkeys(nodes)]


def _verify_one(store: Store, node: str, repair: bool) -> tuple[str | None, bool]:
    """The report line (None when the head agrees with its stream), and whether the node
    agrees now (it may have been repaired)."""
    for _ in range(REPAIR_ATTEMPTS):
        stream = store.read_stream(node)
        if stream.head is None and not stream.events:
            return f"node {node}: unknown: no head and no events", False
        verdict = audit.check(stream.head, stream.events)
        if not verdict.problems:
            return None, True
        report = f"node {node}: {'; '.join(verdict.problems)}"
        if not repair:
            return report, False
        if not verdict.repairable:
            return f"{report} (not repairable: the stream itself is incomplete)", False
        last = stream.events[-1].seq if stream.events else 0
        event = store.new_event(last + 1, "verify", audit.repair(stream.head, verdict))
        if store.repair_head(node, stream, event, verdict.folded):
            return f"{report} -> repaired (event {event.seq})", True
    return f"node {node}: not repaired: the node kept changing while it was being repaired", False


def _nodes(count: int) -> str:
    return f"{count} node{'s' * (count != 1)}"


@click.command("verify")
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("--all", "every", is_flag=True, help="Every node under the prefix.")
@click.option(
    "--repair",
    is_flag=True,
    help="Rewrite each disagreeing head from its stream, recorded as a head_repaired event.",
)
def verify(nodes: tuple[str, ...], every: bool, repair: bool) -> None:
    """Fold each node's events and compare the result with its head (the record core reads).

    \b
    Prints one line per node that disagrees, saying what differs with both values:
      node n1: usage differs: head nvidia-3090:3, stream nvidia-3090:2
    Exit status: 0 when every head agrees (or was repaired), 1 otherwise.

    With --repair, a head is rewritten from its stream when the stream is whole (no events
    missing). The repair is an event like any other: head_repaired, holding the head as it
    was found. A head the upstream plugin wrote that has no stream yet is not a disagreement.
    """

    def check(session: Session) -> str:
        store = session.store
        targets = _targets(store, nodes, every, "verify")
        reports: list[str] = []
        failed = 0
        for node in targets:
            try:
                report, agrees = _verify_one(store, node, repair)
            except PluginError as exc:
                report, agrees = f"node {node}: cannot verify: {exc.reason}", False
            if report:
                reports.append(report)
            failed += not agrees
        if reports:
            respond("\n".join(reports), text=True, io=session.io)
        if failed:
            hint = "" if repair else " (--repair rewrites heads from their streams)"
            verb = "disagrees" if failed == 1 else "disagree"
            raise PluginError(f"{failed} of {_nodes(len(targets))} {verb} with their streams{hint}")
        repaired = f", {len(reports)} repaired" if reports else ""
        return f"{_nodes(len(targets))} verified: every head agrees with its stream{repaired}"

    run("verify", check, config=click_config(), text=True)


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
    "--export-dir",
    metavar="DIR",
    help="Where the removed events are written first (default: streams.export_dir).",
)
def compact(nodes: tuple[str, ...], every: bool, keep: int, export_dir: str | None) -> None:
    """Bound event streams: replace all but the newest --keep events by one checkpoint.

    \b
    For each node: the events to go are written to DIR as JSON lines
    (<node>.<first>-<last>.<op>.jsonl), then one transaction puts a checkpoint event, holding
    the full state and the export's host:path, in place of the newest of them and deletes the
    rest. history, show --at and verify start from the checkpoint; points before it name the
    export. Streams can also be bounded as they grow: see streams.max_events in gpu.yaml.
    """

    def run_compaction(session: Session) -> str:
        from ledger.compaction import compact as compact_node

        directory = export_dir or session.config.streams.export_dir
        if not directory:
            raise PluginError("no export directory: pass --export-dir or set streams.export_dir")
        store = session.store
        lines = []
        for node in _targets(store, nodes, every, "compact"):
            session.node = node
            done = compact_node(store, node, keep=keep, export_dir=directory)
            session.node = None
            if done is None:
                lines.append(f"node {node}: nothing to compact")
                continue
            checkpoint = done.checkpoint
            lines.append(f"node {node}: {audit.compacted_note(checkpoint)}")
        return "\n".join(lines)

    run("compact", run_compaction, config=click_config(), text=True)
