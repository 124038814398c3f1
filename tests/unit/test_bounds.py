"""Each stream's share of the budget: ledger/upkeep/bounds.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from resource_extend.ledger.host.config import StreamsConfig
from resource_extend.ledger.upkeep.bounds import EVENT_BYTES, FLOOR, Bound, bound_of, stream_bound
from tests.unit.strategies import FAST

DEFAULTS = StreamsConfig()


def default_bound(nodes: int) -> Bound | None:
    return stream_bound(budget=DEFAULTS.budget, max_events=DEFAULTS.max_events, nodes=nodes)


def test_the_defaults_bound_streams_at_every_node_count() -> None:
    keeps = {nodes: default_bound(nodes) for nodes in (1, 100, 1_000, 10_000, 1_000_000)}
    assert {nodes: bound.keep for nodes, bound in keeps.items() if bound} == {
        1: 1000,  # max_events binds while nodes are few
        100: 1000,
        1_000: 131,  # 64 MiB / (1,000 x 512 B)
        10_000: 13,
        1_000_000: FLOOR,
    }


@given(nodes=st.integers(1, 10_000_000), budget=st.integers(1, 1 << 40))
@FAST
def test_the_total_is_the_budget_whatever_the_node_count(nodes: int, budget: int) -> None:
    """Counted at EVENT_BYTES an event, every stream at its compaction point holds no more than
    a tenth over the budget in all, or FLOOR events each once the nodes are that many."""
    bound = stream_bound(budget=budget, max_events=0, nodes=nodes)
    assert bound is not None
    total = nodes * bound.over * EVENT_BYTES
    assert bound.keep == FLOOR or total <= budget * 1.1 + nodes * EVENT_BYTES


def test_no_limits_no_bound() -> None:
    assert stream_bound(budget=0, max_events=0, nodes=10) is None
    assert stream_bound(budget=0, max_events=50, nodes=10**6) == bound_of(50)


def test_a_bound_compacts_a_tenth_over_and_refuses_at_twice() -> None:
    bound = bound_of(1000)
    assert (bound.keep, bound.over, bound.at_least, bound.full) == (1000, 1100, 100, 2000)
    assert bound_of(4).over == 5  # at least one over


def test_the_archiver_keeps_half() -> None:
    assert bound_of(131).halved() == bound_of(65)
    assert bound_of(FLOOR).halved() == bound_of(FLOOR)
