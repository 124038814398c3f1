"""``verify``: check heads against their streams and checkpoints against their exports."""

from __future__ import annotations

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.audit.archive import archive_dir, archive_option
from resource_extend.commands.audit.foreign import report_foreign
from resource_extend.commands.protocol import Answer, Session, respond
from resource_extend.commands.under_click import answered, with_progress
from resource_extend.ledger.model.counts import plural
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.names import check_node_name
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep.verification import Trust, Verified, verify_node


def nodes_or_all(nodes: tuple[str, ...], every: bool) -> None:
    """A usage error (exit 2) unless the command was given nodes or ``--all``, not both."""
    if every == bool(nodes):
        ctx = click.get_current_context()
        raise click.UsageError(f"name the nodes to {ctx.info_name}, or pass --all (not both)", ctx)


def named_nodes(store: Store[Struct], nodes: tuple[str, ...], every: bool) -> list[str]:
    """The nodes named, or with ``every`` all under the prefix (``nodes_or_all`` checked; a
    key there that names no node is reported, and left out)."""
    if every:
        found = sorted(store.scans.list_nodes())
        report_foreign(store.scans, click.get_current_context().command_path.split()[-1])
        return found
    return [check_node_name(node) for node in dict.fromkeys(nodes)]


def export_dirs(session: Session[Struct], archive: str) -> list[str]:
    """Where verify looks for the exports of compactions killed before their commit: the
    archive, and where this host's compactions write when no archive is given
    (``StreamsConfig``), each once."""
    here = session.config.streams.destination.directory
    return list(dict.fromkeys(d for d in (archive, here) if d))


@click.command("verify")
@click.argument("nodes", nargs=-1, metavar="[NODE]...")
@click.option("--all", "every", is_flag=True, help="Every node under the prefix.")
@archive_option
@click.option(
    "--digests",
    is_flag=True,
    help=(
        "Also print each stream's end and its digest (SHA-256 of its last event as stored): "
        "kept outside etcd, it shows a history rewritten whole."
    ),
)
@click.option(
    "--allow-elsewhere",
    is_flag=True,
    help=(
        "Take an export that cannot be read here (on another host, or in an archive not "
        "given) on trust, noting it, rather than count its node as disagreeing: its "
        "checkpoint's state is then not checked."
    ),
)
@click.option(
    "--repair",
    is_flag=True,
    help=(
        "Rewrite each disagreeing head from its stream, recorded as a head_repaired event; "
        "publish an export an interrupted compaction left unpublished."
    ),
)
@answered
def verify(
    session: Session[Struct],
    nodes: tuple[str, ...],
    every: bool,
    archive: str | None,
    digests: bool,
    allow_elsewhere: bool,
    repair: bool,
) -> Answer:
    """Fold each node's events and compare the result with its head (the record core reads);
    check the exports a compacted stream's checkpoints name, back to event 1.

    \b
    Prints one line per node that disagrees, saying what differs with both values:
      node n1: usage differs: head <the record's usage>, stream <what the events fold to>
    Exit status: 0 when every head agrees (or was repaired), 1 otherwise, and 1 for a named
    node that does not exist (no head and no events: said so, not counted as disagreeing).
    An event stamped more than 60 s ahead of this host's clock, or of the clock of the
    writer after it, is noted ("node n1: note: event 7 is stamped 3 h ahead ..."): its
    writer's clock was ahead. A note is no disagreement; doctor's "event times" check
    fails on it while it lasts.

    A compacted stream starts with a checkpoint naming its export: archive:<file> in the
    archive (read with --archive, or streams.archive_dir), or host:path. When that file is
    here it must hold exactly the events the checkpoint stands for: every line an
    event, seqs without gaps from event 1 or the previous checkpoint up to the checkpoint's,
    folding to the checkpoint's state, and the file name carrying the checkpoint's op (and
    its digest, from 0.8). The previous checkpoint's export is checked the same way, back to
    event 1. A missing or mismatched export is a disagreement, and so is one that cannot be
    read here (on another host, or in an archive not given), whose checkpoint then cannot be
    checked either: --allow-elsewhere notes it instead.

    With --repair, a head is rewritten from its stream when the stream is whole (no events
    missing) and its checkpoint checks out against its export. The repair is an event like
    any other: head_repaired, holding the head as it was found. An export left as
    <name>.partial by a compaction interrupted between its commit and the rename is renamed,
    once its content checks out. A head the upstream plugin wrote that has no stream yet is
    not a disagreement.
    """
    nodes_or_all(nodes, every)
    store = session.store
    store.etcd.budget_per_request()  # many nodes outlast one call's budget; no request may
    targets = named_nodes(store, nodes, every)
    exports = archive_dir(session, archive)
    trust = Trust(exports, allow_elsewhere)
    directories = export_dirs(session, exports)
    walk = Walk()
    with with_progress(targets, "verifying") as walked:
        for node in walked:
            try:
                found = verify_node(store, node, trust, repair, directories)
            except PluginError as exc:
                found = Verified(findings=[f"cannot verify: {exc.reason}"], agrees=False)
            walk.add(node, found, digests)
    if walk.reports:
        respond("\n".join(walk.reports), text=True, io=session.io)
    verified = len(targets) - len(walk.unknown)
    problems = walk.problems(verified, repair)
    if problems:
        raise PluginError("; ".join(problems))
    return walk.summary(verified)


class Walk(Struct):
    """What verify found over the nodes it walked: the lines to print, the nodes that
    disagree, those that do not exist, and the totals of the rest."""

    reports: list[str] = msgspec.field(default_factory=list)
    failed: int = 0
    unknown: list[str] = msgspec.field(default_factory=list)
    total: Verified = msgspec.field(default_factory=Verified)

    def add(self, node: str, found: Verified, digests: bool) -> None:
        """One node's findings (with ``digests``, where its stream ends too)."""
        if not found.known:
            self.unknown.append(node)
            return
        if found.findings:
            self.reports.append(f"node {node}: {'; '.join(found.findings)}")
        if digests and found.tip:
            self.reports.append(f"node {node}: {found.tip}")
        self.failed += not found.agrees
        self.total.repaired += found.repaired
        self.total.exports_read += found.exports_read
        self.total.exports_elsewhere += found.exports_elsewhere
        self.total.clocks += found.clocks

    def problems(self, verified: int, repair: bool) -> list[str]:
        """Why verify fails, one phrase each: nodes that disagree, nodes named that do not
        exist; none when every head agrees."""
        problems = []
        if self.failed:
            hint = "" if repair else " (--repair rewrites heads and publishes exports)"
            disagree = (
                "disagrees with its stream or exports"
                if self.failed == 1
                else "disagree with their streams or exports"
            )
            problems.append(f"{self.failed} of {plural(verified, 'node')} {disagree}{hint}")
        if self.unknown:
            shown = ", ".join(self.unknown[:5])
            shown += f" and {len(self.unknown) - 5} more" if self.unknown[5:] else ""
            nodes = "node" if len(self.unknown) == 1 else "nodes"
            problems.append(f"no such {nodes} under the prefix (no head, no events): {shown}")
        return problems

    def summary(self, verified: int) -> str:
        """verify's answer when every head agrees: what was checked, repaired and noted."""
        total = self.total
        summary = f"{plural(verified, 'node')} verified: every head agrees with its stream"
        if total.exports_read:
            summary += f", {plural(total.exports_read, 'export')} checked"
        if total.exports_elsewhere:
            summary += f", {total.exports_elsewhere} elsewhere not checked (allowed)"
        if total.repaired:
            summary += f", {total.repaired} repaired"
        if total.clocks:
            summary += f"; {plural(len(total.clocks), 'event')} stamped by a clock ahead (noted)"
        return summary
