"""``resource-gpu``: the eru GPU resource plugin.

Core runs ``resource-gpu <verb>`` with one JSON request on stdin; auditors run ``history``.
Each subcommand's module is imported only when that subcommand runs, so a verb loads only
what it needs (``name`` and ``verbs`` load neither etcd nor a config file).
"""

from __future__ import annotations

import importlib
import sys

import click

PROG = "resource-gpu"

CORE_VERBS: dict[str, str] = {
    "add-node": "commands.writes:add_node",
    "remove-node": "commands.writes:remove_node",
    "set-node-resource-capacity": "commands.writes:set_node_resource_capacity",
    "set-node-resource-usage": "commands.writes:set_node_resource_usage",
    "set-node-resource-info": "commands.writes:set_node_resource_info",
    "fix-node-resource": "commands.writes:fix_node_resource",
    "calculate-deploy": "commands.queries:calculate_deploy",
    "calculate-realloc": "commands.queries:calculate_realloc",
    "get-nodes-deploy-capacity": "commands.queries:get_nodes_deploy_capacity",
    "get-node-resource-info": "commands.queries:get_node_resource_info",
    "get-nodes-resource-info": "commands.queries:get_nodes_resource_info",
    "get-most-idle-node": "commands.queries:get_most_idle_node",
    "get-metrics-description": "commands.meta:get_metrics_description",
    "get-metrics": "commands.queries:get_metrics",
    "name": "commands.meta:name",
    "verbs": "commands.meta:verbs",
}
"""The verbs offered to core (the answer of ``verbs``)."""

HIDDEN_VERBS: dict[str, str] = {
    # Not offered (cards are never re-pinned), but an older core may still call it.
    "calculate-remap": "commands.meta:calculate_remap",
}

AUDITOR_COMMANDS: dict[str, str] = {
    "history": "commands.history:history",
    "show": "commands.state:show",
    "nodes": "commands.state:nodes",
    "verify": "commands.verify:verify",
    "export": "commands.history:export",
    "compact": "commands.verify:compact",
}
"""Commands for people (auditors, operators); not offered to core."""

COMMANDS = {**CORE_VERBS, **HIDDEN_VERBS, **AUDITOR_COMMANDS}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(CORE_VERBS) + list(AUDITOR_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    metavar="PATH",
    help="Config file (default: $ERU_RESOURCE_CONFIG_PATH, else ./gpu.yaml).",
)
def cli(config: str | None) -> None:
    """The eru GPU resource plugin: whole cards by product model, on an event-sourced ledger
    in etcd.

    \b
    Core runs one verb per call:  resource-gpu VERB < request.json

    Every change to a node is an event under <prefix>/resource/gpu/<node>/events/, appended
    with compare-and-swap; capacity and usage are their fold. Verbs print one JSON answer on
    success and one line on stderr (exit 1) on failure.

    \b
    Auditors and operators:
      resource-gpu nodes                           every node, its state and stream length
      resource-gpu history NODE [--since/--until POINT] [--kind K] [--limit N] [--json]
      resource-gpu show NODE [--at POINT] [--json] capacity and usage then
      resource-gpu verify NODE... | --all [--repair]   do heads match their streams?
      resource-gpu export NODE > NODE.jsonl        the stream as JSON lines
      resource-gpu compact NODE... | --all --keep N [--export-dir DIR]
    POINT is a seq or an RFC 3339 time. Run "resource-gpu COMMAND --help" for each.
    """


def main(argv: list[str] | None = None) -> None:
    """The console script: click's usage errors become one line too, like every failure."""
    try:
        status = cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.UsageError as exc:
        sys.stderr.write(f"{PROG}: {exc.format_message()} (see '{PROG} --help')\n")
        raise SystemExit(exc.exit_code) from None
    except click.ClickException as exc:
        sys.stderr.write(f"{PROG}: {exc.format_message()}\n")
        raise SystemExit(exc.exit_code) from None
    except click.Abort:
        sys.stderr.write(f"{PROG}: aborted\n")
        raise SystemExit(1) from None
    raise SystemExit(status if isinstance(status, int) else 0)


if __name__ == "__main__":
    main()
