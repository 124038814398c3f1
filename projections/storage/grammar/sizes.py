"""Human sizes (``1G``, ``500MiB``, ``-1T``) as eru reads them: binary multipliers always.

The rules are core's ``ParseRAMInHuman`` over docker's ``RAMInBytes``: a plain integer is
itself; otherwise every leading ``-`` is stripped (and negates), and the rest is a decimal
number, an optional space, and an optional ``k/m/g/t/p`` suffix with an optional ``i`` and
``b``, case-insensitive. Fractions are truncated toward zero.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest

MAX_SIZE = 2**63 - 1
"""Sizes are Go int64s on the wire; anything larger is refused, never wrapped."""

Int64 = Annotated[int, msgspec.Meta(ge=-MAX_SIZE - 1, le=MAX_SIZE)]
"""A JSON integer a Go ``int64`` can hold: decoding refuses larger ones (msgspec would not)."""

_HUMAN = re.compile(r"(\d+(?:\.\d+)*) ?([kmgtp])?i?b?", re.IGNORECASE | re.ASCII)
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_MULTIPLIERS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}


class InvalidSize(InvalidRequest):
    """A string that is not a human size."""


def parse_size(text: str) -> int:
    """Bytes in ``text``; ``""`` is 0. Raises :class:`InvalidSize`."""
    if text == "":
        return 0
    if _INTEGER.fullmatch(text):
        return _bounded(int(text), text)
    body = text.lstrip("-")
    sign = -1 if len(body) < len(text) else 1
    match = _HUMAN.fullmatch(body)
    if match is None:
        raise InvalidSize(f"invalid size: {text!r}")
    try:
        number = float(match[1])
    except ValueError:  # "1.2.3" passes the pattern, as in Go, and fails here
        raise InvalidSize(f"invalid size: {text!r}") from None
    value = number * _MULTIPLIERS[(match[2] or "").lower()]
    if value >= 2.0**63:
        raise InvalidSize(f"invalid size: {text!r} is too large")
    return sign * int(value)


def go_div(numerator: int, denominator: int) -> int:
    """Go's integer division: truncated toward zero (Python's ``//`` floors)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator >= 0) else -quotient


def _bounded(value: int, text: str) -> int:
    if not -MAX_SIZE - 1 <= value <= MAX_SIZE:
        raise InvalidSize(f"invalid size: {text!r} is too large")
    return value
