"""Card-map arithmetic: ledger/cards.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from tests.unit.strategies import FAST, signed_maps


def test_normalised_drops_zero_counts_and_sorts_keys() -> None:
    result = cards.normalised({"b": 2, "a": 0, "c": -1, "a2": 1})
    assert result == {"a2": 1, "b": 2, "c": -1}
    assert list(result) == ["a2", "b", "c"]


def test_normalised_of_empty_and_all_zero_maps_is_empty() -> None:
    assert cards.normalised({}) == {}
    assert cards.normalised({"a": 0, "b": 0}) == {}


def test_add_merges_products_and_drops_zeros() -> None:
    assert cards.add({"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": 1, "b": 5, "c": 4}
    assert cards.add({"a": 1}, {"a": -1}) == {}
    assert cards.add({}, {}) == {}


def test_add_keeps_negative_results() -> None:
    assert cards.add({"a": 1}, {"a": -3}) == {"a": -2}


def test_negate_flips_every_sign() -> None:
    assert cards.negate({"a": 2, "b": -1}) == {"a": -2, "b": 1}
    assert cards.negate({}) == {}


def test_subtract() -> None:
    assert cards.subtract({"a": 4, "b": 4}, {"a": 1}) == {"a": 3, "b": 4}
    assert cards.subtract({"a": 1}, {"a": 1}) == {}
    assert cards.subtract({"a": 1}, {"b": 2}) == {"a": 1, "b": -2}


def test_sum_all() -> None:
    assert cards.sum_all([]) == {}
    assert cards.sum_all([{"a": 1, "b": 1}, {"a": 2}, {"b": -1}]) == {"a": 3}


def test_total() -> None:
    assert cards.total({}) == 0
    assert cards.total({"a": 4, "b": 4}) == 8
    assert cards.total({"a": 4, "b": -1}) == 3


def test_clamped_keeps_only_positive_counts() -> None:
    assert cards.clamped({"a": 2, "b": 0, "c": -3}) == {"a": 2}
    assert cards.clamped({}) == {}


def test_below_zero_keeps_only_negative_counts() -> None:
    assert cards.below_zero({"a": 2, "b": 0, "c": -3}) == {"c": -3}
    assert cards.below_zero({"a": 1}) == {}


def test_describe() -> None:
    assert cards.describe({}) == "none"
    assert cards.describe({"nvidia-3090": 2, "nvidia-3070": 1}) == "nvidia-3070:1, nvidia-3090:2"


def test_operations_do_not_mutate_their_inputs() -> None:
    left: Cards = {"a": 1, "b": 0}
    right: Cards = {"a": -1, "c": 2}
    cards.add(left, right)
    cards.subtract(left, right)
    cards.negate(right)
    cards.normalised(left)
    cards.clamped(right)
    cards.sum_all([left, right])
    assert left == {"a": 1, "b": 0}
    assert right == {"a": -1, "c": 2}


@FAST
@given(signed_maps)
def test_normalised_has_no_zeros_and_is_idempotent(m: Cards) -> None:
    n = cards.normalised(m)
    assert 0 not in n.values()
    assert cards.normalised(n) == n
    assert {p: c for p, c in m.items() if c != 0} == n


@FAST
@given(signed_maps, signed_maps)
def test_subtract_undoes_add(a: Cards, b: Cards) -> None:
    assert cards.subtract(cards.add(a, b), b) == cards.normalised(a)
    assert cards.add(cards.subtract(a, b), b) == cards.normalised(a)


@FAST
@given(signed_maps, signed_maps, signed_maps)
def test_add_is_commutative_and_associative(a: Cards, b: Cards, c: Cards) -> None:
    assert cards.add(a, b) == cards.add(b, a)
    assert cards.add(cards.add(a, b), c) == cards.add(a, cards.add(b, c))


@FAST
@given(signed_maps, signed_maps)
def test_add_results_are_normalised(a: Cards, b: Cards) -> None:
    result = cards.add(a, b)
    assert 0 not in result.values()
    assert list(result) == sorted(result)


@FAST
@given(signed_maps)
def test_a_map_minus_itself_is_empty(a: Cards) -> None:
    assert cards.add(a, cards.negate(a)) == {}
    assert cards.subtract(a, a) == {}


@FAST
@given(signed_maps, signed_maps)
def test_total_is_additive(a: Cards, b: Cards) -> None:
    assert cards.total(cards.add(a, b)) == cards.total(a) + cards.total(b)


@FAST
@given(signed_maps)
def test_clamped_and_below_zero_partition_the_normalised_map(a: Cards) -> None:
    positive, negative = cards.clamped(a), cards.below_zero(a)
    assert all(c > 0 for c in positive.values())
    assert all(c < 0 for c in negative.values())
    assert not positive.keys() & negative.keys()
    assert {**positive, **negative} == cards.normalised(a)


@FAST
@given(signed_maps, signed_maps, signed_maps)
def test_sum_all_equals_repeated_add(a: Cards, b: Cards, c: Cards) -> None:
    assert cards.sum_all([a, b, c]) == cards.add(cards.add(a, b), c)


@FAST
@given(st.lists(signed_maps, max_size=30))
def test_sum_all_is_the_fold_of_add(maps: list[Cards]) -> None:
    expected: Cards = {}
    for each in maps:
        expected = cards.add(expected, each)
    assert cards.sum_all(maps) == expected
