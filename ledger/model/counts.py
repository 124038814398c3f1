"""How a count is said in a line a person reads."""

from __future__ import annotations


def plural(number: int, what: str) -> str:
    """``1 node``, ``2 nodes``, ``0 node records``: the count and its noun, agreeing."""
    return f"{number} {what}{'s' * (number != 1)}"
