"""Text tables for people: what the auditor's and operator's commands print."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Collection, Sequence

NARROWEST = 12
"""The fewest characters a wrapped column is given, however narrow the terminal."""


def columns(
    lines: Sequence[Sequence[str]], width: int | None = None, wrap: Collection[int] = ()
) -> str:
    """Rows of cells as aligned text columns, two spaces apart; the last column is not padded.

    Given a ``width`` the table would pass, the columns ``wrap`` names (prose: a state, a
    change) are narrowed to fit, each cell wrapped at its words onto lines of its own; the
    others keep their width, so a row still reads across. A row is then as many lines as its
    tallest cell."""
    natural = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    if width is not None:
        words = [
            max(len(word) for line in lines for word in [*line[i].split(), ""])
            for i in range(len(natural))
        ]
        widths = _fitted(natural, words, width, wrap)
    else:
        widths = natural
    shown = []
    for line in lines:
        cells = [
            textwrap.wrap(cell, widths[i], break_on_hyphens=False, break_long_words=False) or [""]
            if width is not None and i in wrap and len(cell) > widths[i]
            else [cell]
            for i, cell in enumerate(line)
        ]
        for row in range(max(map(len, cells))):
            parts = [(cell[row] if row < len(cell) else "") for cell in cells]
            padded = [p.ljust(w) for p, w in zip(parts[:-1], widths, strict=False)]
            shown.append("  ".join([*padded, parts[-1]]).rstrip())
    return "\n".join(shown)


def _fitted(natural: list[int], words: list[int], width: int, wrap: Collection[int]) -> list[int]:
    """Column widths within ``width``: the wrapped columns share what the others leave, in
    proportion to what they would take, none under ``NARROWEST`` (or its own width, if less)
    or its longest word (a word is never broken: a terminal too narrow for that gets a wider
    table)."""
    gaps = 2 * (len(natural) - 1)
    if sum(natural) + gaps <= width or not wrap:
        return natural
    room = width - gaps - sum(w for i, w in enumerate(natural) if i not in wrap)
    floors = {i: max(min(natural[i], NARROWEST), words[i]) for i in wrap}
    widths = list(natural)
    sharing = set(wrap)
    while sharing:  # those whose share is under their floor take the floor, the rest share again
        wanted = sum(natural[i] for i in sharing)
        left = room - sum(floors[i] for i in wrap if i not in sharing)
        short = {i for i in sharing if left * natural[i] // wanted < floors[i]}
        if not short:
            for i in sharing:
                widths[i] = min(natural[i], left * natural[i] // wanted)
            break
        sharing -= short
    for i in wrap:
        if i not in sharing:
            widths[i] = floors[i]
    return widths


def terminal_width() -> int | None:
    """The terminal's width where stdout is one (``$COLUMNS`` first, as ``shutil`` reads it);
    ``None`` for a pipe or a file, whose rows stay one line each for the tools that read them."""
    if not sys.stdout.isatty():
        return None
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return None
