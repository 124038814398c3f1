"""The command line for people (``resource-gpu``, ``resource-storage``): help, usage errors,
the auditor commands.

Core's own calls skip it (``commands.main``). Each subcommand's module is imported only when
that subcommand runs, so a verb loads only what it needs (``name`` and ``verbs`` load neither
etcd nor a config file).
"""

from __future__ import annotations

import copy
import sys

import click

from resource_extend.commands.program import current
from resource_extend.commands.protocol import Verb
from resource_extend.commands.registry import AUDITOR_COMMANDS, CORE_VERBS, load


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(CORE_VERBS) + list(AUDITOR_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        loaded = load(cmd_name)
        command = loaded.command() if isinstance(loaded, Verb) else loaded
        assert command is None or isinstance(command, click.Command)
        if command is not None and command.help:
            # The shared commands' help is written once, naming {prog} and {config}: a copy
            # shows this program's, the command itself stays as written.
            filled = current().fill(command.help)
            if filled != command.help:
                command = copy.copy(command)
                command.help = filled
        return command


HELP = """{summary}, on an event-sourced ledger in etcd.

\b
Core runs one verb per call:  {prog} VERB < request.json

Every change to a node is an event under <prefix>/resource-events/{kind}/<node>/, appended
with compare-and-swap; capacity and usage are their fold, kept in the node's record at
<prefix>/resource/{kind}/<node>, where the upstream plugin keeps it. Verbs print one JSON
answer on success and one line on stderr (exit 1) on failure. resource-gpu and
resource-storage are one command tree over one ledger: each serves its own kind.

\b
Auditors and operators:
  {prog} nodes                           every node, its state and stream length
  {prog} history NODE [--since/--until POINT] [--kind K] [--limit N] [--json]
  {prog} show NODE [--at POINT] [--json] capacity and usage then
  {prog} verify NODE... | --all [--repair]   do heads match their streams?
  {prog} export NODE > NODE.jsonl        the stream as JSON lines
  {prog} compact NODE... | --all --keep N [--export-dir DIR] [--min-age S]
  {prog} helper [--stop] [--all]         the resident helper serving core's calls
  {prog} migrate [--dry-run]             move streams resource-gpu 0.1 wrote
  {prog} footprint [--top N] [--json]    the plugin's share of etcd, and how full etcd is
  {prog} archive --archive DIR [--every S]   old events out of etcd, into one directory
history, show and verify read that directory with --archive DIR: a node's life from event 1.
POINT is a seq or an RFC 3339 time. Run "{prog} COMMAND --help" for each.
"""


CONFIG_HELP = "Config file (default: $ERU_RESOURCE_CONFIG_PATH, else ./{config})."


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    metavar="PATH",
    help=CONFIG_HELP,
)
def cli(config: str | None) -> None:
    pass


def main(argv: list[str] | None = None) -> None:
    """Run the CLI: click's usage errors become one line too, like every failure."""
    program = current()
    cli.help = HELP.format(prog=program.name, kind=program.kind, summary=program.summary)
    (config,) = (p for p in cli.params if isinstance(p, click.Option) and p.name == "config")
    config.help = program.fill(CONFIG_HELP)
    prog = program.name
    try:
        status = cli.main(args=argv, prog_name=prog, standalone_mode=False)
    except click.UsageError as exc:
        sys.stderr.write(f"{prog}: {exc.format_message()} (see '{prog} --help')\n")
        raise SystemExit(exc.exit_code) from None
    except click.ClickException as exc:
        sys.stderr.write(f"{prog}: {exc.format_message()}\n")
        raise SystemExit(exc.exit_code) from None
    except click.Abort:
        sys.stderr.write(f"{prog}: aborted\n")
        raise SystemExit(1) from None
    raise SystemExit(status if isinstance(status, int) else 0)


if __name__ == "__main__":
    main()
