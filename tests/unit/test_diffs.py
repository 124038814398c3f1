"""Where stored usage disagrees with the workloads: projections/diffs.py."""

from __future__ import annotations

from hypothesis import given

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.diffs import usage_diffs
from tests.unit.strategies import FAST, P70, P90, held_maps


def test_upstream_vector_three_diffs() -> None:
    diffs = usage_diffs({}, {P70: 1, P90: 1})
    assert diffs == [  # resource-extend's words: the totals first, then each product
        "node.usage != sum(workload.request): 0 != 2",
        f"{P70} not in usage",
        f"{P90} not in usage",
    ]


def test_equal_maps_have_no_diffs() -> None:
    assert usage_diffs({}, {}) == []
    assert usage_diffs({P70: 1, P90: 2}, {P90: 2, P70: 1}) == []


def test_existing_node_without_workloads_has_no_diffs() -> None:
    assert usage_diffs({}, cards.sum_all([])) == []


def test_count_mismatch_names_both_numbers() -> None:
    diffs = usage_diffs({P70: 3}, {P70: 5})
    assert diffs == ["node.usage != sum(workload.request): 3 != 5", f"{P70}: actual(5) != usage(3)"]


def test_equal_totals_but_different_products() -> None:
    diffs = usage_diffs({P70: 2}, {P70: 1, P90: 1})
    assert diffs == [f"{P70}: actual(1) != usage(2)", f"{P90} not in usage"]


def test_a_product_only_in_usage_shows_in_the_total() -> None:
    diffs = usage_diffs({P70: 1, P90: 1}, {P70: 1})
    assert diffs == ["node.usage != sum(workload.request): 2 != 1"]


def test_workload_products_are_reported_by_name() -> None:
    diffs = usage_diffs({}, {"zz": 1, "aa": 1, "mm": 1})
    assert diffs[1:] == ["aa not in usage", "mm not in usage", "zz not in usage"]


def test_usage_without_workloads() -> None:
    assert usage_diffs({P70: 2}, {}) == ["node.usage != sum(workload.request): 2 != 0"]


def test_every_line_is_one_line() -> None:
    for line in usage_diffs({P70: 3, "x": 1}, {P70: 1, P90: 4}):
        assert line
        assert "\n" not in line


@FAST
@given(usage=held_maps, held=held_maps)
def test_diffs_are_non_empty_iff_the_maps_differ(usage: Cards, held: Cards) -> None:
    usage, held = cards.normalised(usage), cards.normalised(held)
    assert bool(usage_diffs(usage, held)) == (usage != held)


@FAST
@given(usage=held_maps, held=held_maps)
def test_one_line_per_disagreeing_workload_product_plus_total(usage: Cards, held: Cards) -> None:
    usage, held = cards.normalised(usage), cards.normalised(held)
    disagreeing = [p for p, n in held.items() if usage.get(p) != n]
    totals_differ = cards.total(usage) != cards.total(held)
    assert len(usage_diffs(usage, held)) == len(disagreeing) + int(totals_differ)
