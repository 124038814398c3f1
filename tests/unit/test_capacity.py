"""Capacity math, deploy and realloc plans, the most idle node: projections/capacity.py."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.ledger.model.errors import NotEnoughResource, PluginError
from resource_extend.projections.answers import DeployCapacity
from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.capacity import (
    IDLE_PRIORITY,
    UNBOUNDED,
    ReallocPlan,
    deploy_capacity,
    fits,
    idleness,
    most_idle,
    nodes_deploy_capacity,
    plan_deploy,
    plan_realloc,
)
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.node import NodeState
from tests.unit.strategies import (
    EIGHT,
    FAST,
    P70,
    P90,
    PRODUCTS,
    held_maps,
    nonempty_positive_maps,
    signed_maps,
)

EMPTY = NodeState()


# --- fits ------------------------------------------------------------------------------------


def test_constants() -> None:
    assert UNBOUNDED == 1_000_000
    assert IDLE_PRIORITY == 100


@pytest.mark.parametrize("state", [EIGHT, EMPTY, NodeState(capacity={P70: 1}, usage={P70: 5})])
def test_a_request_without_cards_is_unbounded(state: NodeState) -> None:
    assert fits(state, {}) == 1_000_000


def test_fits_is_the_smallest_quotient() -> None:
    state = NodeState(capacity={P70: 7, P90: 4}, usage={P90: 1})
    assert fits(state, {P70: 2}) == 3
    assert fits(state, {P90: 1}) == 3
    assert fits(state, {P70: 1, P90: 2}) == 1
    assert fits(state, {P70: 8}) == 0


def test_a_product_the_node_lacks_fits_zero() -> None:
    assert fits(EIGHT, {"a100": 1}) == 0
    assert fits(EIGHT, {P70: 1, "a100": 1}) == 0
    assert fits(EMPTY, {P70: 1}) == 0


def test_fits_past_what_a_request_without_cards_gets() -> None:
    """A stored head is read without a request's bounds: an upstream node of 3,000,000
    cards fits 3,000,000 copies of one, not ``UNBOUNDED``."""
    state = NodeState(capacity={P70: 3_000_000, P90: 4})
    assert fits(state, {P70: 1}) == 3_000_000
    assert fits(state, {P70: 1, P90: 1}) == 4


def test_capacity_shrunk_below_usage_fits_zero() -> None:
    state = NodeState(capacity={P70: 1}, usage={P70: 3})
    assert fits(state, {P70: 1}) == 0


@FAST
@given(capacity=held_maps, usage=held_maps, request=nonempty_positive_maps)
def test_fits_times_request_never_exceeds_available(
    capacity: Cards, usage: Cards, request: Cards
) -> None:
    state = NodeState(capacity=cards.normalised(capacity), usage=cards.normalised(usage))
    n = fits(state, request)
    available = state.available
    assert n >= 0
    for product, count in request.items():
        assert n * count <= max(available.get(product, 0), 0)
    # ... and it is the largest such number: one more copy does not fit somewhere.
    assert any((n + 1) * count > available.get(p, 0) for p, count in request.items())


# --- deploy_capacity: the upstream get-nodes-deploy-capacity table ---------------------------


@pytest.mark.parametrize(
    ("request_", "per_node"),
    [
        ({P70: 2}, 2),
        ({P70: 3}, 1),
        ({P70: 5}, 0),
        ({P70: 1, P90: 1}, 4),
        ({P70: 1, P90: 2}, 2),
        ({P70: 2, P90: 2}, 2),
        ({P70: 4, P90: 4}, 1),
        ({P70: 5, P90: 4}, 0),
        ({}, 1_000_000),
    ],
)
def test_upstream_deploy_capacity_table(request_: Cards, per_node: int) -> None:
    nodes = [("n1", EIGHT), ("n2", EIGHT)]
    entries = {node: deploy_capacity(state, request_) for node, state in nodes}
    assert all(entry.capacity == per_node for entry in entries.values())
    # Nodes that fit nothing are left out; the total is the sum of the rest.
    answer = nodes_deploy_capacity(nodes, request_)
    assert answer.nodes_deploy_capacity_map == (entries if per_node else {})
    assert answer.total == 2 * per_node


@FAST
@given(states=st.lists(st.tuples(held_maps, held_maps), max_size=5), request=nonempty_positive_maps)
def test_nodes_deploy_capacity_is_each_nodes_entry(
    states: list[tuple[Cards, Cards]], request: Cards
) -> None:
    nodes = [
        (f"n{i}", NodeState(capacity=cards.normalised(c), usage=cards.normalised(u)))
        for i, (c, u) in enumerate(states)
    ]
    entries = {node: deploy_capacity(state, request) for node, state in nodes}
    answer = nodes_deploy_capacity(nodes, request)
    assert answer.nodes_deploy_capacity_map == {n: e for n, e in entries.items() if e.capacity}
    assert list(answer.nodes_deploy_capacity_map) == [n for n, e in entries.items() if e.capacity]


def test_deploy_capacity_without_cards_on_empty_nodes() -> None:
    entry = deploy_capacity(EMPTY, {})
    assert entry == DeployCapacity.of(1_000_000, 0.0, 0.0)


def test_deploy_capacity_ratios() -> None:
    state = NodeState(capacity={P70: 4, P90: 4}, usage={P70: 1, P90: 1})
    entry = deploy_capacity(state, {P70: 1, P90: 1})
    assert entry.capacity == 3
    assert (bytes(entry.usage), bytes(entry.rate), bytes(entry.weight)) == (b"0.25", b"0.25", b"1")


def test_deploy_capacity_null_request_on_eight_cards() -> None:
    entry = deploy_capacity(EIGHT, {})
    assert entry == DeployCapacity.of(1_000_000, 0.0, 0.0)


def test_deploy_capacity_ratios_are_zero_without_cards() -> None:
    state = NodeState(capacity={}, usage={P70: 2})
    entry = deploy_capacity(state, {P70: 1})
    assert entry.capacity == 0
    assert (bytes(entry.usage), bytes(entry.rate)) == (b"0", b"0")


def test_deploy_capacity_json_is_gos_capitalised_keys_and_whole_floats() -> None:
    entry = deploy_capacity(EIGHT, {P70: 2})
    assert msgspec.json.encode(entry) == b'{"Capacity":2,"Usage":0,"Rate":0.25,"Weight":1}'
    full = NodeState(capacity={P70: 8}, usage={P70: 8})
    assert msgspec.json.encode(deploy_capacity(full, {P70: 8})) == (
        b'{"Capacity":0,"Usage":1,"Rate":1,"Weight":1}'
    )


# --- plan_deploy -----------------------------------------------------------------------------


def test_plan_deploy_returns_count_copies() -> None:
    plan = plan_deploy("n1", EIGHT, {P70: 1, P90: 1}, 4)
    assert plan == [{P70: 1, P90: 1}] * 4


def test_plan_deploy_copies_are_independent() -> None:
    request = {P70: 1}
    plan = plan_deploy("n1", EIGHT, request, 2)
    plan[0][P70] = 99
    assert plan[1] == {P70: 1}
    assert request == {P70: 1}


def test_plan_deploy_without_cards_gives_empty_entries() -> None:
    assert plan_deploy("n1", EIGHT, {}, 4) == [{}, {}, {}, {}]
    assert plan_deploy("n1", EMPTY, {}, 3) == [{}, {}, {}]


def test_plan_deploy_of_zero_copies() -> None:
    assert plan_deploy("n1", EIGHT, {P70: 1}, 0) == []
    assert plan_deploy("n1", EMPTY, {P70: 1}, 0) == []


def test_plan_deploy_not_enough() -> None:
    with pytest.raises(NotEnoughResource) as info:
        plan_deploy("n1", EIGHT, {P70: 1, P90: 1}, 5)
    assert "not enough" in info.value.reason
    assert info.value.node == "n1"
    assert isinstance(info.value, PluginError)


def test_plan_deploy_not_enough_on_a_node_without_the_product() -> None:
    with pytest.raises(NotEnoughResource, match="not enough"):
        plan_deploy("n1", EIGHT, {"a100": 1}, 1)


def test_plan_deploy_counts_usage() -> None:
    state = NodeState(capacity={P70: 4}, usage={P70: 3})
    assert plan_deploy("n1", state, {P70: 1}, 1) == [{P70: 1}]
    with pytest.raises(NotEnoughResource):
        plan_deploy("n1", state, {P70: 1}, 2)


@FAST
@given(
    capacity=held_maps, request=nonempty_positive_maps, count=st.integers(min_value=0, max_value=8)
)
def test_plan_deploy_succeeds_exactly_when_the_copies_fit(
    capacity: Cards, request: Cards, count: int
) -> None:
    state = NodeState(capacity=cards.normalised(capacity))
    need = {p: c * count for p, c in request.items()}
    enough = all(state.available.get(p, 0) >= n for p, n in need.items())
    if enough:
        assert plan_deploy("n1", state, request, count) == [request] * count
    else:
        with pytest.raises(NotEnoughResource):
            plan_deploy("n1", state, request, count)


# --- plan_realloc ----------------------------------------------------------------------------

# The upstream calculate-realloc table, on an 8-card node whose usage is {3070:1, 3090:1}.
REALLOC_NODE = NodeState(capacity={P70: 4, P90: 4}, usage={P70: 1, P90: 1})


@pytest.mark.parametrize(
    ("current", "request_", "new", "delta"),
    [
        ({}, {}, {}, {}),
        ({P90: 1}, {}, {P90: 1}, {}),
        ({P90: 1}, {P90: 2}, {P90: 3}, {P90: 2}),
        ({P90: 1}, {P90: 1, P70: 1}, {P90: 2, P70: 1}, {P90: 1, P70: 1}),
        ({P90: 1}, {P90: -1, P70: 1}, {P70: 1}, {P70: 1, P90: -1}),
        ({P90: 1}, {P90: -5, P70: 1}, {P70: 1}, {P70: 1, P90: -1}),
    ],
)
def test_upstream_realloc_table(current: Cards, request_: Cards, new: Cards, delta: Cards) -> None:
    plan = plan_realloc("n1", REALLOC_NODE, current, request_)
    assert plan == ReallocPlan(new=new, delta=delta)


def test_realloc_giving_everything_back() -> None:
    plan = plan_realloc("n1", REALLOC_NODE, {P90: 1, P70: 1}, {P90: -1, P70: -3})
    assert plan == ReallocPlan(new={}, delta={P90: -1, P70: -1})


def test_realloc_not_enough() -> None:
    # available 3090 = 3: holding 1 and asking for 4 more needs 4.
    with pytest.raises(NotEnoughResource) as info:
        plan_realloc("n1", REALLOC_NODE, {P90: 1}, {P90: 4})
    assert "not enough" in info.value.reason
    assert info.value.node == "n1"


def test_realloc_may_grow_into_exactly_the_available_cards() -> None:
    plan = plan_realloc("n1", REALLOC_NODE, {P90: 1}, {P90: 3})
    assert plan == ReallocPlan(new={P90: 4}, delta={P90: 3})


def test_realloc_of_a_product_the_node_lacks_is_not_enough() -> None:
    with pytest.raises(NotEnoughResource):
        plan_realloc("n1", REALLOC_NODE, {}, {"a100": 1})


def test_realloc_shrinking_on_an_overcommitted_node_is_allowed() -> None:
    state = NodeState(capacity={P70: 1}, usage={P70: 3})
    plan = plan_realloc("n1", state, {P70: 3}, {P70: -1})
    assert plan == ReallocPlan(new={P70: 2}, delta={P70: -1})


@FAST
@given(current=held_maps, request=signed_maps)
def test_realloc_plan_laws(current: Cards, request: Cards) -> None:
    current = cards.normalised(current)
    request = cards.normalised(request)
    roomy = NodeState(capacity=dict.fromkeys(PRODUCTS, 100))
    plan = plan_realloc("n1", roomy, current, request)
    assert all(count > 0 for count in plan.new.values())
    assert plan.new == cards.clamped(cards.add(current, request))
    assert plan.delta == cards.subtract(plan.new, current)
    assert cards.add(current, plan.delta) == plan.new
    assert 0 not in plan.delta.values()


@FAST
@given(capacity=held_maps, usage=held_maps, current=held_maps, request=signed_maps)
def test_realloc_fails_exactly_when_growth_exceeds_available(
    capacity: Cards, usage: Cards, current: Cards, request: Cards
) -> None:
    state = NodeState(capacity=cards.normalised(capacity), usage=cards.normalised(usage))
    current = cards.normalised(current)
    new = cards.clamped(cards.add(current, request))
    growth = cards.clamped(cards.subtract(new, current))
    fits_ = all(n <= state.available.get(p, 0) for p, n in growth.items())
    if fits_:
        plan = plan_realloc("n1", state, current, request)
        assert plan.new == new
    else:
        with pytest.raises(NotEnoughResource):
            plan_realloc("n1", state, current, request)


# --- most_idle -------------------------------------------------------------------------------


def test_idleness() -> None:
    assert idleness(EIGHT) == 0.0
    assert idleness(EMPTY) == 0.0
    assert idleness(NodeState(capacity={P70: 4, P90: 4}, usage={P70: 2})) == 0.25
    assert idleness(NodeState(capacity={}, usage={P70: 2})) == 0.0


def test_most_idle_upstream_vector() -> None:
    busy = NodeState(capacity=EIGHT.capacity, usage={P70: 1})
    assert most_idle({"node1": EIGHT, "node2": busy}) == "node1"
    assert most_idle({"node2": busy, "node1": EIGHT}) == "node1"


def test_most_idle_picks_the_lowest_ratio_regardless_of_name() -> None:
    busy = NodeState(capacity=EIGHT.capacity, usage={P70: 1})
    assert most_idle({"a": busy, "b": EIGHT}) == "b"


def test_most_idle_tie_goes_to_the_first_by_name() -> None:
    assert most_idle({"n3": EIGHT, "n1": EIGHT, "n2": EIGHT}) == "n1"
    half_a = NodeState(capacity={P70: 2}, usage={P70: 1})
    half_b = NodeState(capacity={P70: 8}, usage={P70: 4})
    assert most_idle({"zeta": half_b, "alpha": half_a}) == "alpha"


def test_most_idle_node_without_cards_counts_as_idle() -> None:
    busy = NodeState(capacity={P70: 4}, usage={P70: 1})
    assert most_idle({"a": busy, "b": EMPTY}) == "b"


def test_most_idle_of_one_node() -> None:
    assert most_idle({"only": NodeState(capacity={P70: 1}, usage={P70: 1})}) == "only"


@FAST
@given(
    st.dictionaries(
        st.text(alphabet="abcxyz019", min_size=1, max_size=4),
        st.tuples(st.integers(0, 4), st.integers(0, 4)),
        min_size=1,
        max_size=6,
    )
)
def test_most_idle_is_the_minimum_of_ratio_then_name(nodes: dict[str, tuple[int, int]]) -> None:
    states = {
        name: NodeState(capacity={P70: total} if total else {}, usage={P70: used} if used else {})
        for name, (total, used) in nodes.items()
    }
    chosen = most_idle(states)
    assert chosen in states
    for name, state in states.items():
        assert idleness(states[chosen]) <= idleness(state)
        if idleness(state) == idleness(states[chosen]):
            assert chosen <= name
