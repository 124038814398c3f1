"""A float64 in Go's ``encoding/json`` bytes. The vectors are what Go 1.19's ``json.Marshal``
printed for each value (Debian's golang-go); 42,561 values (random bit patterns, random
ratios, every power of ten) agreed with it when the module was written."""

from __future__ import annotations

import math
import struct

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.projections.gofloat import go_float, go_float_text

GO_WROTE = [
    (0.0, "0"),
    (-0.0, "-0"),
    (1.0, "1"),
    (2.0, "2"),
    (12.0, "12"),
    (0.25, "0.25"),
    (-0.5, "-0.5"),
    (0.3333333333333333, "0.3333333333333333"),
    (0.30000000000000004, "0.30000000000000004"),
    (0.0001, "0.0001"),
    (9.99e-05, "0.0000999"),
    (1.5e-05, "0.000015"),
    (1e-05, "0.00001"),
    (4.76837158203125e-06, "0.00000476837158203125"),
    (1e-06, "0.000001"),
    (9.99e-07, "9.99e-7"),
    (1e-07, "1e-7"),
    (-1e-07, "-1e-7"),
    (1.0842021724855044e-19, "1.0842021724855044e-19"),
    (5e-324, "5e-324"),
    (1e15, "1000000000000000"),
    (1e16, "10000000000000000"),
    (1.2345678901234568e17, "123456789012345680"),
    (9.223372036854776e18, "9223372036854776000"),
    (1e20, "100000000000000000000"),
    (1e21, "1e+21"),
    (1.5e300, "1.5e+300"),
]


@pytest.mark.parametrize(("value", "written"), GO_WROTE)
def test_a_float_is_written_as_go_writes_it(value: float, written: str) -> None:
    assert go_float_text(value) == written
    assert go_float(value) == msgspec.Raw(written.encode())


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_what_json_cannot_hold_is_refused_as_go_refuses_it(value: float) -> None:
    with pytest.raises(ValueError, match="unsupported value"):
        go_float_text(value)
    for _ in range(2):  # refused again: a refusal is not kept as an answer
        with pytest.raises(ValueError, match="unsupported value"):
            go_float(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_the_text_reads_back_as_the_same_float(value: float) -> None:
    text = go_float_text(value)
    assert struct.pack("<d", float(text)) == struct.pack("<d", value)  # -0 and 0 apart too
    assert text == text.strip() and ".0e" not in text and not text.endswith(".0")


def test_a_value_written_again_is_written_the_same_and_zero_keeps_its_sign() -> None:
    """Values are kept once worked out; 0.0 and -0.0, equal as keys, are not one value."""
    for value, written in [*GO_WROTE, *reversed(GO_WROTE)]:
        assert bytes(go_float(value)) == written.encode()
    assert [bytes(go_float(v)) for v in (0.0, -0.0, 0.0, -0.0)] == [b"0", b"-0", b"0", b"-0"]
