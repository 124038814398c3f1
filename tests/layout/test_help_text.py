"""Every command's ``--help``, of both programs, as people read it: byte for byte what
``tests/layout/help/<program>.txt`` holds. A change of help text shows here as a diff to look
at; when it is meant, write the files anew:

    RESOURCE_EXTEND_WRITE_HELP=1 scripts/test tests/layout/test_help_text.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from resource_extend.commands.programs import programs

HELP = Path(__file__).parent / "help"
ROOT = Path(__file__).resolve().parents[2]
WRITE = "RESOURCE_EXTEND_WRITE_HELP"


EVERY_HELP = """
import sys
from resource_extend.commands.programs import programs
from resource_extend.commands.registry import COMMANDS
from tests.plugin import in_process
plugin = programs()[sys.argv[1]]
for args in ([], ["--help"], *([name, "--help"] for name in sorted({*COMMANDS, *plugin.commands}))):
    result = in_process(plugin, args)
    sys.stdout.write(f"$ {plugin.name} {' '.join(args)}\\n{result.stdout}{result.stderr}")
"""
"""The program's bare usage, its --help, then each command's --help, in name order: in a
process of its own, as a person's shell runs them (click keeps what a command showed once)."""


def every_help(program: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", EVERY_HELP, program],
        capture_output=True, text=True, check=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    return done.stdout


@pytest.mark.parametrize("program", sorted(programs()))
def test_every_help_is_as_written_down(program: str) -> None:
    path = HELP / f"{program}.txt"
    shown = every_help(program)
    if os.environ.get(WRITE):
        path.write_text(shown)
    assert shown == path.read_text(), f"--help changed: see the diff, or set {WRITE}=1"


EXAMPLES = ("eru-cli ", "nvidia-smi ", "/", "--kind [")
"""What a help line wider than 80 columns may begin with, besides its program's name: a
command to copy whole, and click's list of an option's choices."""


@pytest.mark.parametrize("program", sorted(programs()))
def test_every_paragraph_of_the_help_ends_at_one_margin(program: str) -> None:
    """Click rewraps prose to 78 columns and keeps a ``\\b`` block as written: those blocks
    are brought to the same margin (``commands.cli.folded``), all but the examples."""
    wide = [
        line
        for line in every_help(program).splitlines()
        if len(line) > 80 and not line.lstrip().startswith((program, *EXAMPLES))
    ]
    assert wide == [], "\n".join(wide)
