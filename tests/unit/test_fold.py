"""A node's state as the fold of its events: projections/node.py."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.events import (
    Adopted,
    CapacityChanged,
    CapacitySet,
    Change,
    Event,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from resource_extend.projections.gpu.node import GPU, BrokenStream, NodeState, apply, fold
from tests.unit.strategies import FAST, held_maps, signed_maps

AT = datetime(2024, 1, 1, tzinfo=timezone.utc)
START = NodeState(capacity={"nvidia-3070": 4, "nvidia-3090": 4}, usage={"nvidia-3070": 1})


def events(*changes: Change) -> list[Event]:
    return [
        Event(seq=i, at=AT, verb="test", op=f"op{i}", change=c)
        for i, c in enumerate(changes, start=1)
    ]


# --- NodeState -------------------------------------------------------------------------------


def test_default_state_is_empty() -> None:
    state = NodeState()
    assert state.capacity == {}
    assert state.usage == {}
    assert state.available == {}


def test_available_is_capacity_minus_usage() -> None:
    state = NodeState(capacity={"a": 4, "b": 4}, usage={"a": 1, "b": 4})
    assert state.available == {"a": 3}


def test_available_is_negative_when_capacity_was_shrunk_below_usage() -> None:
    state = NodeState(capacity={"a": 1}, usage={"a": 3, "b": 1})
    assert state.available == {"a": -2, "b": -1}


def test_states_compare_by_value() -> None:
    assert NodeState(capacity={"a": 1}) == NodeState(capacity={"a": 1}, usage={})
    assert NodeState(capacity={"a": 1}) != NodeState(usage={"a": 1})


# --- apply, one change kind at a time --------------------------------------------------------


def test_node_added_creates_a_node_with_empty_usage() -> None:
    assert apply(None, NodeAdded(capacity={"a": 2})) == NodeState(capacity={"a": 2})


def test_node_added_without_cards() -> None:
    assert apply(None, NodeAdded(capacity={})) == NodeState()


@pytest.mark.parametrize("before", [None, START])
def test_adopted_takes_the_record_as_found(before: NodeState | None) -> None:
    change = Adopted(capacity={"a": 8}, usage={"a": 2})
    assert apply(before, change) == NodeState(capacity={"a": 8}, usage={"a": 2})


@pytest.mark.parametrize("before", [None, START])
def test_node_info_set_overwrites_or_creates(before: NodeState | None) -> None:
    change = NodeInfoSet(capacity={"b": 1}, usage={})
    assert apply(before, change) == NodeState(capacity={"b": 1}, usage={})


@pytest.mark.parametrize("before", [None, START])
def test_node_removed_leaves_no_node(before: NodeState | None) -> None:
    assert apply(before, NodeRemoved()) is None


def test_capacity_set_replaces_capacity_and_keeps_usage() -> None:
    after = apply(START, CapacitySet(capacity={"a100": 2}))
    assert after == NodeState(capacity={"a100": 2}, usage=START.usage)


def test_capacity_changed_adds_the_delta() -> None:
    after = apply(START, CapacityChanged(delta={"nvidia-3070": -4, "nvidia-3090": 1, "x": 1}))
    assert after == NodeState(capacity={"nvidia-3090": 5, "x": 1}, usage=START.usage)


def test_usage_changed_adds_the_delta_and_keeps_capacity() -> None:
    after = apply(START, UsageChanged(delta={"nvidia-3070": -1, "nvidia-3090": 2}))
    assert after == NodeState(capacity=START.capacity, usage={"nvidia-3090": 2})


def test_usage_set_replaces_usage() -> None:
    after = apply(START, UsageSet(usage={"nvidia-3090": 3}))
    assert after == NodeState(capacity=START.capacity, usage={"nvidia-3090": 3})


def test_usage_rebuilt_replaces_usage() -> None:
    after = apply(START, UsageRebuilt(usage={"nvidia-3090": 1}, diffs=["x"]))
    assert after == NodeState(capacity=START.capacity, usage={"nvidia-3090": 1})


@pytest.mark.parametrize(
    ("change", "after"),
    [
        (CapacitySet(capacity={"a": 1}), NodeState(capacity={"a": 1})),
        (CapacityChanged(delta={"a": 1}), NodeState(capacity={"a": 1})),
        (UsageChanged(delta={"a": 1}), NodeState(usage={"a": 1})),
        (UsageSet(usage={"a": 1}), NodeState(usage={"a": 1})),
    ],
    ids=lambda c: type(c).__name__,
)
def test_an_edit_of_a_missing_node_applies_to_the_empty_node(
    change: Change, after: NodeState
) -> None:
    """A node with no record reads as an empty one, and an edit of it creates its record."""
    assert apply(None, change) == after == apply(GPU.empty(), change)


def test_a_fix_of_a_missing_node_breaks_the_stream() -> None:
    """fix-node-resource refuses a node with no record: no stream can hold one."""
    with pytest.raises(BrokenStream, match="UsageRebuilt"):
        apply(None, UsageRebuilt(usage={"a": 1}, diffs=[]))


def test_broken_stream_is_a_value_error() -> None:
    assert issubclass(BrokenStream, ValueError)


def test_apply_does_not_mutate_the_state() -> None:
    state = NodeState(capacity={"a": 2}, usage={"a": 1})
    apply(state, UsageChanged(delta={"a": 1}))
    apply(state, CapacityChanged(delta={"a": -1}))
    assert state == NodeState(capacity={"a": 2}, usage={"a": 1})


# --- fold ------------------------------------------------------------------------------------


def test_fold_of_nothing_is_the_start_state() -> None:
    assert fold([]) is None
    assert fold([], START) == START


def test_fold_of_a_life_cycle() -> None:
    stream = events(
        NodeAdded(capacity={"nvidia-3070": 4, "nvidia-3090": 4}),
        UsageChanged(delta={"nvidia-3070": 1, "nvidia-3090": 1}),
        CapacityChanged(delta={"nvidia-3070": 1}),
        UsageChanged(delta={"nvidia-3090": -1}),
        UsageRebuilt(usage={"nvidia-3070": 2}, diffs=["d"]),
        CapacitySet(capacity={"nvidia-3070": 3}),
    )
    assert fold(stream) == NodeState(capacity={"nvidia-3070": 3}, usage={"nvidia-3070": 2})


def test_fold_continues_from_a_given_state() -> None:
    stream = events(UsageChanged(delta={"nvidia-3090": 2}))
    assert fold(stream, START) == NodeState(
        capacity=START.capacity, usage={"nvidia-3070": 1, "nvidia-3090": 2}
    )


def test_fold_after_removal_and_re_add_starts_fresh() -> None:
    stream = events(
        NodeAdded(capacity={"a": 4}),
        UsageChanged(delta={"a": 2}),
        NodeRemoved(),
        NodeAdded(capacity={"b": 1}),
    )
    assert fold(stream) == NodeState(capacity={"b": 1})


def test_fold_ending_in_removal_is_none() -> None:
    assert fold(events(NodeAdded(capacity={"a": 1}), NodeRemoved())) is None


def test_fold_of_a_stream_begun_by_an_edit_starts_from_the_empty_node() -> None:
    stream = events(CapacityChanged(delta={"a": 2}), UsageChanged(delta={"a": 1}))
    assert fold(stream) == NodeState(capacity={"a": 2}, usage={"a": 1})


def test_fold_of_an_edit_after_removal_starts_from_the_empty_node() -> None:
    stream = events(
        NodeAdded(capacity={"a": 1}), UsageChanged(delta={"a": 1}), NodeRemoved(),
        CapacitySet(capacity={"b": 3}),
    )  # fmt: skip
    assert fold(stream) == NodeState(capacity={"b": 3})


def test_fold_of_a_fix_after_removal_is_broken() -> None:
    with pytest.raises(BrokenStream):
        fold(events(NodeAdded(capacity={"a": 1}), NodeRemoved(), UsageRebuilt(usage={}, diffs=[])))


def test_fold_accepts_any_iterable() -> None:
    stream = events(NodeAdded(capacity={"a": 1}), UsageChanged(delta={"a": 1}))
    assert fold(iter(stream)) == NodeState(capacity={"a": 1}, usage={"a": 1})


@FAST
@given(capacity=held_maps, deltas=st.lists(signed_maps, max_size=12))
def test_fold_of_usage_deltas_is_their_sum(capacity: Cards, deltas: list[Cards]) -> None:
    capacity = cards.normalised(capacity)
    stream = events(NodeAdded(capacity=capacity), *(UsageChanged(delta=d) for d in deltas))
    state = fold(stream)
    assert state == NodeState(capacity=capacity, usage=cards.sum_all(deltas))


@FAST
@given(start=held_maps, deltas=st.lists(signed_maps, max_size=12))
def test_fold_of_capacity_deltas_is_their_sum(start: Cards, deltas: list[Cards]) -> None:
    stream = events(
        NodeAdded(capacity=cards.normalised(start)), *(CapacityChanged(delta=d) for d in deltas)
    )
    state = fold(stream)
    assert state is not None
    assert state.capacity == cards.sum_all([start, *deltas])
    assert state.usage == {}


@FAST
@given(
    head=st.lists(signed_maps, max_size=6),
    tail=st.lists(signed_maps, max_size=6),
)
def test_fold_is_resumable(head: list[Cards], tail: list[Cards]) -> None:
    """Folding a stream in two parts gives the same state as folding it at once."""
    stream = events(NodeAdded(capacity={"a": 1}), *(UsageChanged(delta=d) for d in head + tail))
    cut = 1 + len(head)
    assert fold(stream[cut:], fold(stream[:cut])) == fold(stream)
