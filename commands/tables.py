"""Text tables for people: what the auditor's and operator's commands print."""

from __future__ import annotations

from collections.abc import Sequence


def columns(lines: Sequence[Sequence[str]]) -> str:
    """Rows of cells as aligned text columns, two spaces apart; the last column is not padded."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    widths[-1] = 0
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
