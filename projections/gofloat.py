"""A float64 in the bytes Go's ``encoding/json`` writes for it.

Core and the upstream plugins are Go: a whole float is written without ``.0`` (``0``, not
``0.0``), the shortest round-tripping digits in plain notation from 1e-6 up to 1e21, and
exponent notation outside that (``1e-7``, ``1e+21``). msgspec's own float form differs at
every whole number, below 1e-5 and above 1e16, so answers carry these bytes instead."""

from __future__ import annotations

import functools
import math

import msgspec


def go_float(value: float) -> msgspec.Raw:
    """``value`` as Go's ``json.Marshal(float64)`` writes it; NaN and infinities are refused
    as Go refuses them. A capacity answer writes two a node, and across a fleet most are the
    same few ratios (cards in use of eight, say): each is worked out once, and kept."""
    if value == 0:  # 0.0 and -0.0: one key to a cache, two texts
        return _NEGATIVE_ZERO if math.copysign(1.0, value) < 0 else _ZERO
    return _go_float(value)


@functools.lru_cache(maxsize=4096)
def _go_float(value: float) -> msgspec.Raw:
    return msgspec.Raw(go_float_text(value).encode())


def go_float_text(value: float) -> str:
    """The text of :func:`go_float`."""
    if not math.isfinite(value):
        raise ValueError(f"unsupported value: {value!r} (JSON has no NaN or infinity)")
    size = abs(value)
    if size == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if 1e-4 <= size < 1e16:  # Python's repr is plain here too, and the digits are the same
        return str(int(value)) if value.is_integer() else repr(value)
    sign = "-" if value < 0 else ""
    digits, point = _shortest(size)
    if size < 1e-6 or size >= 1e21:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exponent = point - 1
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent)}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _shortest(size: float) -> tuple[str, int]:
    """The shortest digits that read back as ``size`` (Python's repr and Go's strconv agree on
    them), and where the point goes: ``size == 0.<digits> * 10**point``."""
    mantissa, _, exponent = repr(size).partition("e")
    whole, _, fraction = mantissa.partition(".")
    written = whole + fraction
    digits = written.lstrip("0")
    point = len(whole) + int(exponent or 0) - (len(written) - len(digits))
    return digits.rstrip("0"), point


_ZERO = msgspec.Raw(b"0")
_NEGATIVE_ZERO = msgspec.Raw(b"-0")
