"""Decisions: from a state and a validated request, the change to append: projections/decide.py."""

from __future__ import annotations

import pytest
from hypothesis import given

from resource_extend.ledger.model.errors import (
    InvalidRequest,
    NodeExists,
    NodeNotFound,
    NotEnoughResource,
    PluginError,
)
from resource_extend.projections.gpu import cards, decide
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.diffs import usage_diffs
from resource_extend.projections.gpu.events import (
    CapacityChanged,
    CapacitySet,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from resource_extend.projections.gpu.node import GPU, NodeState, apply
from tests.unit.strategies import EIGHT, FAST, P70, P90, held_maps, signed_maps

R: Cards = {P70: 1}
NONE: Cards = {}


# --- existing / add / remove -----------------------------------------------------------------


def test_add_node() -> None:
    assert decide.add_node("n1", None, {P70: 2}) == NodeAdded(capacity={P70: 2})
    assert decide.add_node("n1", None, {}) == NodeAdded(capacity={})


@pytest.mark.parametrize("state", [EIGHT, NodeState()])
def test_add_existing_node_is_node_exists(state: NodeState) -> None:
    with pytest.raises(NodeExists) as info:
        decide.add_node("n1", state, {P70: 2})
    assert info.value.node == "n1"
    assert info.value.reason == "node already exists"


def test_remove_node() -> None:
    assert decide.remove_node(EIGHT) == NodeRemoved()
    assert decide.remove_node(NodeState()) == NodeRemoved()


def test_remove_missing_node_is_a_no_op() -> None:
    assert decide.remove_node(None) is None


# --- set_capacity ----------------------------------------------------------------------------


@pytest.mark.parametrize("delta", [True, False])
def test_set_capacity_of_a_missing_node_creates_it_from_the_empty_node(delta: bool) -> None:
    change = decide.set_capacity("n1", None, {P70: 2}, delta=delta, incr=True)
    assert change == decide.set_capacity("n1", NodeState(), {P70: 2}, delta=delta, incr=True)
    assert GPU.apply(None, change) == NodeState(capacity={P70: 2})


@pytest.mark.parametrize("given", [{}, None])
@pytest.mark.parametrize("delta", [True, False])
def test_set_capacity_of_a_missing_node_that_changes_nothing_appends_nothing(
    delta: bool, given: Cards | None
) -> None:
    assert decide.set_capacity("n1", None, given, delta=delta, incr=True) is None


def test_a_capacity_delta_below_zero_of_a_missing_node_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="fall below zero"):
        decide.set_capacity("n1", None, {P70: 1}, delta=True, incr=False)


def test_set_capacity_naming_no_cards_keeps_the_capacity() -> None:
    """A replace whose resource_request has no prod_count_map, as upstream."""
    assert decide.set_capacity("n1", EIGHT, None, delta=False, incr=True) is None


@pytest.mark.parametrize("incr", [True, False])
def test_set_capacity_absolute(incr: bool) -> None:
    change = decide.set_capacity("n1", EIGHT, {P90: 2}, delta=False, incr=incr)
    assert change == CapacitySet(capacity={P90: 2})


def test_set_capacity_absolute_to_nothing() -> None:
    assert decide.set_capacity("n1", EIGHT, {}, delta=False, incr=False) == CapacitySet(capacity={})


@pytest.mark.parametrize("incr", [True, False])
def test_set_capacity_absolute_to_the_same_cards_is_a_no_op(incr: bool) -> None:
    assert decide.set_capacity("n1", EIGHT, dict(EIGHT.capacity), delta=False, incr=incr) is None


def test_set_capacity_increment() -> None:
    change = decide.set_capacity("n1", EIGHT, {P70: 1, "a100": 2}, delta=True, incr=True)
    assert change == CapacityChanged(delta={P70: 1, "a100": 2})


def test_set_capacity_decrement_negates() -> None:
    change = decide.set_capacity("n1", EIGHT, {P70: 1}, delta=True, incr=False)
    assert change == CapacityChanged(delta={P70: -1})


def test_set_capacity_negative_counts_with_incr_take_away() -> None:
    change = decide.set_capacity("n1", EIGHT, {P70: -4, P90: 1}, delta=True, incr=True)
    assert change == CapacityChanged(delta={P70: -4, P90: 1})


@pytest.mark.parametrize("incr", [True, False])
def test_set_capacity_empty_delta_is_a_no_op(incr: bool) -> None:
    assert decide.set_capacity("n1", EIGHT, {}, delta=True, incr=incr) is None


@pytest.mark.parametrize(
    ("given", "incr"), [({P70: 5}, False), ({P70: -5}, True), ({"a100": -1}, True)]
)
def test_set_capacity_below_zero_is_invalid_and_names_the_product(given: Cards, incr: bool) -> None:
    product = next(iter(given))
    with pytest.raises(InvalidRequest) as info:
        decide.set_capacity("n1", EIGHT, given, delta=True, incr=incr)
    assert repr(product) in info.value.reason
    assert "capacity" in info.value.reason
    assert "below zero" in info.value.reason
    assert info.value.node == "n1"


def test_set_capacity_below_usage_is_allowed() -> None:
    state = NodeState(capacity={P70: 4}, usage={P70: 3})
    change = decide.set_capacity("n1", state, {P70: -3}, delta=True, incr=True)
    assert change == CapacityChanged(delta={P70: -3})
    assert decide.set_capacity("n1", state, {}, delta=False, incr=True) == CapacitySet(capacity={})


# The upstream set-node-resource-capacity table, run in order from an 8-card node. Each row is
# (winning input, delta, incr, total after); the winning input is resource_request, else resource.
CAPACITY_TABLE: list[tuple[Cards, bool, bool, int]] = [
    (NONE, True, True, 8),  # (null, null, delta, incr)
    (NONE, True, False, 8),  # (null, null, delta, decr)
    (R, True, True, 9),  # (null, R, delta, incr)
    (R, True, False, 8),  # (null, R, delta, decr)
    (R, True, True, 9),  # (R, null, delta, incr)
    (R, True, False, 8),  # (null, R, delta, decr)
    (R, False, False, 1),  # (null, R, absolute, decr)
    (R, False, False, 1),  # (R, null, absolute, decr)
    (R, False, False, 1),  # (R, R, absolute, decr)
    (NONE, False, False, 0),  # (null, null, absolute, decr)
    ({P70: 1}, True, True, 1),  # (null, {3070:1}, delta, incr)
    ({P70: -1}, True, True, 0),  # (null, {3070:-1}, delta, incr)
]


def test_upstream_capacity_table() -> None:
    state: NodeState | None = EIGHT
    for row, (cards_in, delta, incr, after) in enumerate(CAPACITY_TABLE):
        change = decide.set_capacity("n1", state, cards_in, delta=delta, incr=incr)
        if change is not None:
            state = apply(state, change)
        assert state is not None
        assert cards.total(state.capacity) == after, f"row {row}"


# --- set_usage -------------------------------------------------------------------------------


def test_taking_cards_on_a_missing_node_is_refused_for_its_capacity() -> None:
    """An empty node has no cards to take."""
    with pytest.raises(NotEnoughResource, match="exceed its capacity"):
        decide.set_usage("n1", None, {P70: 1}, workloads=None, delta=True, incr=True)


def test_a_usage_replace_of_a_missing_node_creates_it() -> None:
    """A replace is never refused for capacity (core's rollback), on a missing node too."""
    change = decide.set_usage("n1", None, {P70: 1}, workloads=None, delta=False, incr=True)
    assert change == UsageSet(usage={P70: 1})
    assert decide.set_usage("n1", None, {}, workloads=None, delta=False, incr=True) is None


def test_set_usage_absolute() -> None:
    change = decide.set_usage("n1", EIGHT, {P70: 2}, workloads=[{P70: 2}], delta=False, incr=False)
    assert change == UsageSet(usage={P70: 2})


def test_set_usage_absolute_to_the_same_cards_is_a_no_op() -> None:
    state = NodeState(capacity=EIGHT.capacity, usage={P70: 1})
    assert decide.set_usage("n1", state, {P70: 1}, workloads=None, delta=False, incr=True) is None


def test_set_usage_increment_records_the_workloads() -> None:
    workloads: list[Cards] = [{P70: 1}, {P70: 1, P90: 1}]
    change = decide.set_usage(
        "n1", EIGHT, {P70: 2, P90: 1}, workloads=workloads, delta=True, incr=True
    )
    assert change == UsageChanged(delta={P70: 2, P90: 1}, workloads=workloads)


def test_set_usage_decrement_negates() -> None:
    state = NodeState(capacity=EIGHT.capacity, usage={P70: 2})
    change = decide.set_usage("n1", state, {P70: 1}, workloads=None, delta=True, incr=False)
    assert change == UsageChanged(delta={P70: -1}, workloads=None)


def test_set_usage_realloc_delta_with_negative_counts() -> None:
    state = NodeState(capacity=EIGHT.capacity, usage={P90: 1})
    change = decide.set_usage(
        "n1", state, {P70: 1, P90: -1}, workloads=[{P70: 1, P90: -1}], delta=True, incr=True
    )
    assert change == UsageChanged(delta={P70: 1, P90: -1}, workloads=[{P70: 1, P90: -1}])


@pytest.mark.parametrize("incr", [True, False])
def test_set_usage_empty_delta_is_a_no_op(incr: bool) -> None:
    assert decide.set_usage("n1", EIGHT, {}, workloads=None, delta=True, incr=incr) is None


@pytest.mark.parametrize(("given", "incr"), [({P90: 1}, False), ({P90: -1}, True)])
def test_set_usage_below_zero_is_invalid_and_names_the_product(given: Cards, incr: bool) -> None:
    with pytest.raises(InvalidRequest) as info:
        decide.set_usage("n1", EIGHT, given, workloads=None, delta=True, incr=incr)
    assert repr(P90) in info.value.reason
    assert "usage" in info.value.reason
    assert info.value.node == "n1"


def test_an_increment_past_capacity_is_refused() -> None:
    """The last line behind calculate-deploy: decided on the state the compare-and-swap
    checks, so racing deploys cannot together take more cards than the node has."""
    with pytest.raises(NotEnoughResource, match=r"'nvidia-3070' would exceed its capacity"):
        decide.set_usage("n1", EIGHT, {P70: 5}, workloads=None, delta=True, incr=True)
    with pytest.raises(NotEnoughResource, match="capacity 0"):
        decide.set_usage("n1", EIGHT, {"nvidia-t4": 1}, workloads=None, delta=True, incr=True)
    change = decide.set_usage("n1", EIGHT, {P70: 4}, workloads=None, delta=True, incr=True)
    assert change == UsageChanged(delta={P70: 4})


def test_what_lowers_usage_or_replaces_it_may_leave_it_past_capacity() -> None:
    """Capacity may be set below usage: releases, give-backs and absolute sets go through."""
    over = NodeState(capacity={P70: 1, P90: 4}, usage={P70: 3})
    release = decide.set_usage("n1", over, {P70: 1}, workloads=None, delta=True, incr=False)
    assert release == UsageChanged(delta={P70: -1})
    swap = decide.set_usage("n1", over, {P70: -1, P90: 1}, workloads=None, delta=True, incr=True)
    assert swap == UsageChanged(delta={P70: -1, P90: 1})
    replace = decide.set_usage("n1", over, {P70: 9}, workloads=None, delta=False, incr=True)
    assert replace == UsageSet(usage={P70: 9})


# The upstream set-node-resource-usage table, run in order from usage 0 on an 8-card node.
# Each row is (winning input, delta, incr, total usage after); the winning input is
# resource_request, else resource, else the sum of workloads_resource (W = [{3070: 1}]).
USAGE_TABLE: list[tuple[Cards, bool, bool, int]] = [
    (NONE, True, True, 0),  # (null,null,null,Δ,+)
    (NONE, True, False, 0),  # (null,null,null,Δ,-)
    (R, True, True, 1),  # (null,R,null,Δ,+)
    (R, True, False, 0),  # (null,R,null,Δ,-)
    (R, True, True, 1),  # (R,null,null,Δ,+)
    (R, True, False, 0),  # (R,null,null,Δ,-)
    (R, True, True, 1),  # (null,null,W,Δ,+)
    (R, True, False, 0),  # (null,null,W,Δ,-)
    (NONE, True, False, 0),  # (null,null,null,Δ,-)
    (R, False, False, 1),  # (null,R,null,abs,-)
    (R, False, False, 1),  # (R,null,null,abs,-)
    (R, False, False, 1),  # (null,null,W,abs,-)
    (R, False, True, 1),  # (R,R,null,abs,+)
    (R, False, True, 1),  # (null,R,W,abs,+)
    (R, False, True, 1),  # (R,null,W,abs,+)
    (R, False, True, 1),  # (R,R,W,abs,+)
    (R, True, False, 0),  # (R,R,W,Δ,-)
    ({P70: 1}, True, True, 1),  # (null,{3070:1},null,Δ,+)
    ({P70: -1}, True, True, 0),  # (null,{3070:-1},null,Δ,+)
]


def test_upstream_usage_table() -> None:
    state: NodeState | None = EIGHT
    for row, (cards_in, delta, incr, after) in enumerate(USAGE_TABLE):
        change = decide.set_usage("n1", state, cards_in, workloads=None, delta=delta, incr=incr)
        if change is not None:
            state = apply(state, change)
        assert state is not None
        assert cards.total(state.usage) == after, f"row {row}"
        assert state.capacity == EIGHT.capacity


def test_usage_with_an_adopted_negative_count_is_not_an_internal_error() -> None:
    """A state adopted from an upstream record may hold a negative count (the Go plugin's
    decoder accepts it). A valid change to another product must end in a PluginError or a
    change, never in an internal error."""
    state = NodeState(capacity={P70: 4}, usage={P90: -1})
    try:
        change = decide.set_usage("n1", state, {P70: 1}, workloads=None, delta=True, incr=True)
    except PluginError:
        return
    assert change == UsageChanged(delta={P70: 1})


def test_capacity_with_an_adopted_negative_count_is_not_an_internal_error() -> None:
    state = NodeState(capacity={P70: 4, P90: -1})
    try:
        change = decide.set_capacity("n1", state, {P70: 1}, delta=True, incr=True)
    except PluginError:
        return
    assert change == CapacityChanged(delta={P70: 1})


@FAST
@given(usage=held_maps, given_=signed_maps)
def test_set_usage_delta_never_leaves_negative_usage(usage: Cards, given_: Cards) -> None:
    state = NodeState(capacity={P70: 4}, usage=cards.normalised(usage))
    given_ = cards.normalised(given_)
    try:
        change = decide.set_usage("n1", state, given_, workloads=None, delta=True, incr=True)
    except InvalidRequest:
        assert cards.below_zero(cards.add(state.usage, given_))
        return
    except NotEnoughResource:
        raised_past = [
            p
            for p, n in given_.items()
            if n > 0 and state.usage.get(p, 0) + n > state.capacity.get(p, 0)
        ]
        assert raised_past, (state, given_)
        return
    after = apply(state, change) if change is not None else state
    assert after is not None
    assert not cards.below_zero(after.usage)
    assert after.usage == cards.add(state.usage, given_)
    raised = [p for p, n in given_.items() if n > 0]
    assert all(after.usage[p] <= state.capacity.get(p, 0) for p in raised)


# --- set_info --------------------------------------------------------------------------------


def test_set_info_creates_a_missing_node() -> None:
    assert decide.set_info(None, {P70: 1}, {}) == NodeInfoSet(capacity={P70: 1}, usage={})


def test_set_info_leaving_a_missing_node_empty_writes_nothing() -> None:
    """Core's rollback of a removal, for a node this plugin never saw: it reads as empty."""
    assert decide.set_info(None, {}, {}) is None


def test_set_info_overwrites_both() -> None:
    change = decide.set_info(EIGHT, {P90: 2}, {P90: 1})
    assert change == NodeInfoSet(capacity={P90: 2}, usage={P90: 1})


def test_set_info_to_the_same_state_is_a_no_op() -> None:
    state = NodeState(capacity={P70: 4}, usage={P70: 1})
    assert decide.set_info(state, {P70: 4}, {P70: 1}) is None


def test_set_info_may_set_usage_above_capacity() -> None:
    change = decide.set_info(EIGHT, {P70: 1}, {P70: 3})
    assert change == NodeInfoSet(capacity={P70: 1}, usage={P70: 3})


# --- rebuild_usage ---------------------------------------------------------------------------


def test_rebuild_usage_of_a_missing_node_is_node_not_found() -> None:
    with pytest.raises(NodeNotFound):
        decide.rebuild_usage("n1", None, {P70: 1})


def test_rebuild_usage_when_equal_is_a_no_op() -> None:
    assert decide.rebuild_usage("n1", EIGHT, {}) is None
    state = NodeState(capacity=EIGHT.capacity, usage={P70: 1})
    assert decide.rebuild_usage("n1", state, {P70: 1}) is None


def test_rebuild_usage_upstream_vector() -> None:
    change = decide.rebuild_usage("n1", EIGHT, {P70: 1, P90: 1})
    assert isinstance(change, UsageRebuilt)
    assert change.usage == {P70: 1, P90: 1}
    assert len(change.diffs) == 3
    assert change.diffs == usage_diffs({}, {P70: 1, P90: 1})
    after = apply(EIGHT, change)
    assert after is not None
    assert cards.total(after.usage) == 2


def test_rebuild_usage_to_nothing() -> None:
    state = NodeState(capacity=EIGHT.capacity, usage={P70: 2})
    change = decide.rebuild_usage("n1", state, {})
    assert isinstance(change, UsageRebuilt)
    assert change.usage == {}
    assert change.diffs


@FAST
@given(usage=held_maps, held=held_maps)
def test_rebuild_usage_changes_exactly_when_maps_differ(usage: Cards, held: Cards) -> None:
    usage, held = cards.normalised(usage), cards.normalised(held)
    state = NodeState(capacity={P70: 4}, usage=usage)
    change = decide.rebuild_usage("n1", state, held)
    if usage == held:
        assert change is None
    else:
        assert change == UsageRebuilt(usage=held, diffs=usage_diffs(usage, held))
        assert change.diffs


# --- the upper bound: no stored count past MAX_COUNT ------------------------------------------

FULL = NodeState(capacity={P90: 1_000_000}, usage={P90: 999_999})


def test_a_delta_past_the_bound_is_refused_naming_the_sum() -> None:
    with pytest.raises(InvalidRequest, match=r"usage of 'nvidia-3090' would exceed 1000000"):
        decide.set_usage("n1", FULL, {P90: 2}, workloads=None, delta=True, incr=True)
    with pytest.raises(InvalidRequest, match=r"capacity of 'nvidia-3090' would exceed 1000000"):
        decide.set_capacity("n1", FULL, {P90: 1}, delta=True, incr=True)
    taken = decide.set_usage("n1", FULL, {P90: 1}, workloads=None, delta=True, incr=True)
    assert taken is not None
    assert apply(FULL, taken) == NodeState(capacity=FULL.capacity, usage={P90: 1_000_000})


def test_absolute_usage_past_the_bound_is_refused() -> None:
    too_many = {P90: 1_000_001}
    with pytest.raises(InvalidRequest, match="would exceed 1000000"):
        decide.set_usage("n1", FULL, too_many, workloads=None, delta=False, incr=True)
    with pytest.raises(InvalidRequest, match="would exceed 1000000"):
        decide.rebuild_usage("n1", FULL, too_many)
