"""Human sizes: binary multipliers always, fractions truncated, int64 bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.projections.storage.grammar.sizes import (
    MAX_SIZE,
    InvalidSize,
    go_div,
    parse_size,
)
from tests.unit.strategies import FAST

K, M, G, T, P = (2**10 * 1024**n for n in range(5))


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("", 0),
        ("0", 0),
        ("123", 123),
        ("-123", -123),
        ("+7", 7),
        ("1k", K),
        ("1K", K),
        ("1m", M),
        ("1G", G),
        ("1GB", G),
        ("1GiB", G),
        ("1gib", G),
        ("1 G", G),
        ("1 ", 1),  # docker's pattern allows the space without a suffix
        ("1T", T),
        ("1TiB", T),
        ("1P", P),
        ("1.5G", G + G // 2),
        ("0.5k", 512),
        ("1.0001k", 1024),  # truncated
        ("100b", 100),
        ("1B", 1),
        ("-1G", -G),
        ("--1G", -G),  # every leading - is stripped and negates once
        ("500MiB", 500 * M),
        ("9223372036854775807", MAX_SIZE),
        ("-9223372036854775808", -MAX_SIZE - 1),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    "text",
    [
        "xx",
        "G",
        "1X",
        "1GG",
        "1.2.3G",
        " 1",
        "-",
        "1-",
        "1  G",
        "1e3",
        "9223372036854775808",
        "8192P",
    ],
)
def test_not_sizes(text: str) -> None:
    with pytest.raises(InvalidSize) as caught:
        parse_size(text)
    assert caught.value.reason.startswith("invalid size")


@FAST
@given(st.integers(min_value=-MAX_SIZE - 1, max_value=MAX_SIZE))
def test_plain_integers_are_themselves(value: int) -> None:
    assert parse_size(str(value)) == value


@FAST
@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(["k", "m", "g", "t"]))
def test_suffixes_multiply_by_powers_of_1024(number: int, suffix: str) -> None:
    power = "kmgt".index(suffix) + 1
    assert parse_size(f"{number}{suffix}") == number * 1024**power
    assert parse_size(f"{number}{suffix.upper()}iB") == number * 1024**power


@pytest.mark.parametrize(
    "numerator, denominator, quotient",
    [(7, 2, 3), (-7, 2, -3), (-8, 2, -4), (7, -2, -3), (0, 5, 0)],
)
def test_go_division_truncates_toward_zero(numerator: int, denominator: int, quotient: int) -> None:
    assert go_div(numerator, denominator) == quotient
