"""The command line for people (``resource-gpu``, ``resource-storage``): help, usage errors,
the auditor commands.

Core's own calls skip it (``commands.main``). Each subcommand's module is imported only when
that subcommand runs, so a verb loads only what it needs (``name`` and ``verbs`` load neither
etcd nor a config file).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable

import click

from resource_extend.commands.program import DISTRIBUTION, installed_version
from resource_extend.commands.programs import programs
from resource_extend.commands.protocol import EXIT_FAILURE, Verb, output_failure
from resource_extend.commands.registry import (
    AUDITOR_COMMANDS,
    CORE_VERBS,
    load,
    operator_commands,
    people_commands,
)
from resource_extend.commands.under_click import click_plugin, verb_command
from resource_extend.ledger.etcd.choice import serves_many_calls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin


class OwnFormatter(click.HelpFormatter):
    """Help written once for every program (``{prog}``, ``{config}``, ``{port}``), put in this
    program's words as it is written out, before it is wrapped: no command, option or text is
    copied to be made a program's own."""

    def __init__(self, plugin: Plugin, width: int | None, max_width: int | None) -> None:
        super().__init__(width=width, max_width=max_width)
        self.plugin = plugin

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, self.plugin.own_words(args), prefix)

    def write_heading(self, heading: str) -> None:
        super().write_heading(self.plugin.own_words(heading))

    def write_text(self, text: str) -> None:
        own = self.plugin.own_words(text)
        super().write_text(folded(own, self.width - self.current_indent, self.plugin.name))

    def write_dl(
        self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        own = self.plugin.own_words
        super().write_dl([(own(term), own(text)) for term, text in rows], col_max, col_spacing)


def folded(text: str, width: int, program: str) -> str:
    """``text`` with its ``\\b`` blocks (kept as written by click, which rewraps the rest to
    ``width``) brought to ``width`` too, so that every paragraph of the help ends at one
    margin. A line wider than ``width`` is rewrapped together with the lines that go on from
    it (at its text's column, each as wide): a table's row under its second column, a
    sentence under its start. A line that fits keeps its break as written, and an example (a
    command line of ``program``'s, or one with a shell comment) stays whole, to be copied."""
    lines: list[str] = []
    verbatim = False
    row: list[str] = []  # a line too wide, and the lines going on from it
    for line in [*text.split("\n"), ""]:
        if row and _goes_on(row, line, width, program):
            row.append(line)
            continue
        if row:
            lines.extend(_rewrapped(row, width))
            row = []
        if not line.strip():
            verbatim = False
        elif line.strip() == "\b":
            verbatim = True
        elif verbatim and len(line) > width and not _example(line, program):
            row = [line]
            continue
        lines.append(line)
    return "\n".join(lines[:-1])


def _column(line: str) -> int:
    """Where a line's text starts: after a table row's first gap of two spaces, or else after
    its indent."""
    indent = len(line) - len(line.lstrip())
    gap = line.find("  ", indent)
    return len(line) - len(line[gap:].lstrip()) if gap > 0 else indent


def _goes_on(row: list[str], line: str, width: int, program: str) -> bool:
    """Whether ``line`` continues the row: the row's last line reached the writer's margin
    (past ``width``, or within 8 columns of it: its break is where the text ran out of room,
    not one meant), and ``line`` starts at the row's text column."""
    indent = len(line) - len(line.lstrip())
    return (
        bool(line.strip())
        and len(row[-1]) > width - 8
        and indent == _column(row[0])
        and not _example(line, program)
    )


def _rewrapped(row: list[str], width: int) -> list[str]:
    import textwrap

    column = _column(row[0])
    if column >= width // 2:  # no room for a column: under the row's indent
        column = len(row[0]) - len(row[0].lstrip())
    head, text = row[0][:column], " ".join([row[0][column:], *(line.strip() for line in row[1:])])
    wrapped = textwrap.wrap(text, max(width - column, 20), break_on_hyphens=False)
    return [head + wrapped[0], *(" " * column + part for part in wrapped[1:])]


def _example(line: str, program: str) -> bool:
    """A command to copy: ``program``'s, a path's, or one with a shell comment."""
    first = line.split(maxsplit=1)[0]
    table_row = "  " in line.strip() and " # " not in line and "  #" not in line
    return not table_row and (first in (program, "eru-cli", "nvidia-smi") or first[0] == "/")


class OwnContext(click.Context):
    """The context of the program's commands: its help comes out in the program's words."""

    def make_formatter(self) -> click.HelpFormatter:
        return OwnFormatter(click_plugin(self), self.terminal_width, self.max_content_width)


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's lazy-loading pattern)."""

    context_class = OwnContext

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The manual (:data:`HELP`), written once, as this program's."""
        plugin = click_plugin(ctx)
        formatter.write_paragraph()
        with formatter.indentation():
            text = HELP.replace("{summary}", plugin.summary)
            text = text.replace("{programs}", " and ".join(programs()))
            formatter.write_text(inspect.cleandoc(text))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*CORE_VERBS, *people_commands(click_plugin(ctx))]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in three sections, each line made from the command itself: its name,
        its arguments and the first sentence of its help (nothing here is a copy of them)."""
        sections = (
            ("Core's verbs ({prog} VERB < request.json)", CORE_VERBS),
            ("Auditors", AUDITOR_COMMANDS),
            ("Operators", operator_commands(click_plugin(ctx))),
        )
        for title, names in sections:
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                arguments = [p for p in command.params if isinstance(p, click.Argument)]
                rows.append((" ".join([name, *map(_synopsis, arguments)]), command))
            with formatter.section(title):
                # (a first sentence is cut at 200 characters as written, {prog} and all)
                formatter.write_dl(
                    [(synopsis, command.get_short_help_str(200)) for synopsis, command in rows]
                )

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        loaded = load(click_plugin(ctx), cmd_name)
        command = verb_command(loaded) if isinstance(loaded, Verb) else loaded
        if command is None:
            return None
        assert isinstance(command, click.Command)
        # The command as written, shared by both programs: its help comes out in the running
        # program's words (OwnContext), and it takes --config after its name as well.
        command.context_class = OwnContext
        if CONFIG_AFTER not in command.params:
            command.params.append(CONFIG_AFTER)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            import difflib

            close = difflib.get_close_matches(args[0], self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command {args[0]!r}: did you mean {close[0]!r}?")
            raise

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:  # a bare "resource-gpu" (not completion):
            # a few lines, not the whole manual as an error
            click.echo(click_plugin(ctx).own_words(SHORT_USAGE))
            ctx.exit(0)
        return super().parse_args(ctx, args)


def _synopsis(argument: click.Argument) -> str:
    """``NODE``, ``[NODE]...``, ``[WHAT]``: an argument as a command's line lists it."""
    word = (argument.name or "").upper()
    word += "..." if argument.nargs == -1 else ""
    return word if argument.required else f"[{word}]"


SHORT_USAGE = """Usage: {prog} [--config PATH] COMMAND [ARGS]...

Core runs one verb per call: {prog} VERB < request.json
People run the rest:
  {prog} nodes    every node, its state and stream length
  {prog} doctor   what is wrong with this host's set-up, and the fix
  {prog} --help   every command; with a COMMAND, its manual"""


def _remember_config(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    root = ctx.find_root().params
    if root.get("config") not in (None, value):
        raise click.UsageError(f"--config given twice: {root['config']!r} and {value!r}")
    root["config"] = value


HELP = """{summary}, on an event-sourced ledger in etcd.

\b
Core runs one verb per call:  {prog} VERB < request.json

Every change to a node is an event under <prefix>/resource-events/{kind}/<node>/, appended
with compare-and-swap; capacity and usage are their fold, kept in the node's record at
<prefix>/resource/{kind}/<node>, where the upstream plugin keeps it. Verbs print one JSON
answer on success and one line on stderr (exit 1) on failure. {programs} are one command
tree over one ledger: each serves its own kind.

Auditors and operators run the commands listed below; "{prog} COMMAND --help" is each
one's manual. history, show and verify read an archive with --archive DIR (a node's life
from event 1); a POINT (--at, --since, --until) is a seq or an RFC 3339 time.

\b
Exit status: 0 success; 1 a failure, said in one line on stderr (bad input, an unknown
node, not enough resources, etcd unreachable; nothing was written, unless the line
begins "outcome unknown:": that write may have landed); 2 a usage error
(an unknown command or option); 70 an internal error (a bug: set RESOURCE_GPU_DEBUG=1
for its traceback). verify and doctor exit 1 when they find a problem.

\b
Shell completion (bash; zsh and fish likewise):
  eval "$(_{PROG}_COMPLETE=bash_source {prog})"
"""

CONFIG_HELP = "Config file (default: $ERU_RESOURCE_CONFIG_PATH, else ./{config})."

CONFIG_AFTER = click.Option(
    ["--config"], metavar="PATH", expose_value=False, is_eager=True, callback=_remember_config,
    help=CONFIG_HELP,
)  # fmt: skip
"""``--config`` after a command's name as well: ``{prog} show n1 --config gpu.yaml``."""


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    metavar="PATH",
    help=CONFIG_HELP,
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _, value: _print_version(ctx) if value else None,
    help="Print the version and exit.",
)
def cli(config: str | None) -> None:
    pass


def _print_version(ctx: click.Context) -> None:
    click.echo(f"{click_plugin(ctx).name} {installed_version()} ({DISTRIBUTION})")
    ctx.exit(0)


def main(plugin: Plugin, argv: list[str] | None = None) -> None:
    """Run the CLI as ``program``: click's usage errors become one line too, like every
    failure."""
    prog = plugin.name
    serves_many_calls()  # a person's command, the exporter, the helper: etcd.transport auto: gRPC
    try:
        status = cli.main(args=argv, prog_name=prog, standalone_mode=False, obj=plugin)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else prog
        message = exc.format_message().rstrip(".")
        sys.stderr.write(f"{where}: {message} (see '{where} --help')\n")
        raise SystemExit(exc.exit_code) from None
    except click.ClickException as exc:
        sys.stderr.write(f"{prog}: {exc.format_message()}\n")
        raise SystemExit(exc.exit_code) from None
    except click.Abort:
        sys.stderr.write(f"{prog}: aborted\n")
        raise SystemExit(1) from None
    except OSError as exc:  # click's own output (--help, --version, sample-config's text)
        said = output_failure(exc, sys.stdout.buffer)
        if said is None:
            raise
        if said:
            sys.stderr.write(f"{prog}: {said}\n")
        raise SystemExit(EXIT_FAILURE) from None
    raise SystemExit(status if isinstance(status, int) else 0)
