"""``commands.cli.folded``: a help's ``\\b`` blocks brought to the margin click wraps the rest
to, a table's rows under their second column, examples whole."""

from __future__ import annotations

from resource_extend.commands.cli import folded

TABLE = """\
\b
  config       the config file: found (--config, else $ERU_RESOURCE_CONFIG_PATH, else
               ./gpu.yaml) and valid
  clock        the clock
  launcher     what core runs, beside the config
               (a line that fits keeps its break)"""


def test_a_row_too_wide_is_rewrapped_under_its_second_column() -> None:
    assert folded(TABLE, 60, "resource-gpu").split("\n") == [
        "\b",
        "  config       the config file: found (--config, else",
        "               $ERU_RESOURCE_CONFIG_PATH, else ./gpu.yaml)",
        "               and valid",
        "  clock        the clock",
        "  launcher     what core runs, beside the config",
        "               (a line that fits keeps its break)",
    ]


def test_prose_in_a_block_is_rewrapped_under_its_start_and_examples_stay_whole() -> None:
    text = (
        "\b\n"
        "Exit status: 0 success; 1 a failure, said in one line on stderr (bad input, an\n"
        "unknown node).\n"
        "  resource-gpu archive --archive /var/lib/eru/archive --every 60 # a pass a minute\n"
        "\n"
        "A paragraph click rewraps itself, however wide its lines are written here, is left."
    )
    assert folded(text, 50, "resource-gpu").split("\n") == [
        "\b",
        "Exit status: 0 success; 1 a failure, said in one",
        "line on stderr (bad input, an unknown node).",
        "  resource-gpu archive --archive /var/lib/eru/archive --every 60 # a pass a minute",
        "",
        "A paragraph click rewraps itself, however wide its lines are written here, is left.",
    ]
