"""Every command's ``--help``, of both programs, as people read it: byte for byte what
``tests/layout/help/<program>.txt`` holds. A change of help text shows here as a diff to look
at; when it is meant, write the files anew:

    RESOURCE_EXTEND_WRITE_HELP=1 scripts/test tests/layout/test_help_text.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from resource_extend.commands.program import programs
from resource_extend.commands.registry import COMMANDS
from resource_extend.projections.plugin import Plugin
from tests.plugin import in_process

HELP = Path(__file__).parent / "help"
WRITE = "RESOURCE_EXTEND_WRITE_HELP"


def every_help(plugin: Plugin) -> str:
    """The program's bare usage, its --help, then each command's --help, in name order."""
    shown = []
    for args in (
        [],
        ["--help"],
        *([name, "--help"] for name in sorted({*COMMANDS, *plugin.commands})),
    ):
        result = in_process(plugin, args)
        shown.append(f"$ {plugin.name} {' '.join(args)}\n{result.stdout}{result.stderr}")
    return "".join(shown)


@pytest.mark.parametrize("program", sorted(programs()))
def test_every_help_is_as_written_down(program: str) -> None:
    path = HELP / f"{program}.txt"
    shown = every_help(programs()[program])
    if os.environ.get(WRITE):
        path.write_text(shown)
    assert shown == path.read_text(), f"--help changed: see the diff, or set {WRITE}=1"
