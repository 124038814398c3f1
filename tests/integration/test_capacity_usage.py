"""set-node-resource-capacity and set-node-resource-usage, and what they refuse (docs/verbs.md;
upstream's vectors for both)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.helpers import (
    EIGHT,
    RG,
    G,
    Spec,
    event_count,
    fails_on,
    set_usage,
    state,
    total,
)
from tests.plugin import Plugin, R, counts

pytestmark = pytest.mark.resident

R1: Spec = {3070: 1}
W: list[Spec] = [{3070: 1}]
DELTA, ABSOLUTE = True, False
INCR, DECR = True, False


def capacity_request(
    resource: Spec | None, request: Spec | None, delta: bool, incr: bool
) -> dict[str, Any]:
    return {
        "nodename": "n1",
        "resource": RG(resource),
        "resource_request": RG(request),
        "delta": delta,
        "incr": incr,
    }


def usage_request(
    resource: Spec | None,
    request: Spec | None,
    workloads: list[Spec] | None,
    delta: bool,
    incr: bool,
) -> dict[str, Any]:
    return {
        **capacity_request(resource, request, delta, incr),
        "workloads_resource": None if workloads is None else [RG(w) for w in workloads],
    }


# (resource, request, delta, incr) -> after count, in upstream's order; the maps are
# what those counts are, starting from {3070:4, 3090:4}.
CAPACITY_SEQUENCE: list[tuple[Spec | None, Spec | None, bool, bool, int, Spec]] = [
    (None, None, DELTA, INCR, 8, {3070: 4, 3090: 4}),
    (None, None, DELTA, DECR, 8, {3070: 4, 3090: 4}),
    (None, R1, DELTA, INCR, 9, {3070: 5, 3090: 4}),
    (None, R1, DELTA, DECR, 8, {3070: 4, 3090: 4}),
    (R1, None, DELTA, INCR, 9, {3070: 5, 3090: 4}),
    (None, R1, DELTA, DECR, 8, {3070: 4, 3090: 4}),
    (None, R1, ABSOLUTE, DECR, 1, {3070: 1}),
    (R1, None, ABSOLUTE, DECR, 1, {3070: 1}),
    (R1, R1, ABSOLUTE, DECR, 1, {3070: 1}),
    (None, None, ABSOLUTE, DECR, 0, {}),
    (None, {3070: 1}, DELTA, INCR, 1, {3070: 1}),
    (None, {3070: -1}, DELTA, INCR, 0, {}),
]


def test_capacity_table_as_a_sequence(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    before = EIGHT
    for row, (resource, request, delta, incr, count, after) in enumerate(CAPACITY_SEQUENCE, 1):
        where = f"row {row}: {(resource, request, delta, incr)}"
        answer = plugin.ok(
            "set-node-resource-capacity", capacity_request(resource, request, delta, incr)
        )
        assert set(answer) == {"before", "after"}, where
        assert counts(answer["before"]) == before, where
        assert counts(answer["after"]) == G(after), where
        assert total(answer["after"]) == count, where
        before = G(after) or {}
    assert state(plugin, "n1") == ({}, {})


# (resource, request, workloads, delta, incr) -> after, in upstream's order (start 0).
USAGE_SEQUENCE: list[tuple[Spec | None, Spec | None, list[Spec] | None, bool, bool, Spec]] = [
    (None, None, None, DELTA, INCR, {}),
    (None, None, None, DELTA, DECR, {}),
    (None, R1, None, DELTA, INCR, R1),
    (None, R1, None, DELTA, DECR, {}),
    (R1, None, None, DELTA, INCR, R1),
    (R1, None, None, DELTA, DECR, {}),
    (None, None, W, DELTA, INCR, R1),
    (None, None, W, DELTA, DECR, {}),
    (None, None, None, DELTA, DECR, {}),
    (None, R1, None, ABSOLUTE, DECR, R1),
    (R1, None, None, ABSOLUTE, DECR, R1),
    (None, None, W, ABSOLUTE, DECR, R1),
    (R1, R1, None, ABSOLUTE, INCR, R1),
    (None, R1, W, ABSOLUTE, INCR, R1),
    (R1, None, W, ABSOLUTE, INCR, R1),
    (R1, R1, W, ABSOLUTE, INCR, R1),
    (R1, R1, W, DELTA, DECR, {}),  # only one input wins: 1 - 1, not 1 - 3
    (None, {3070: 1}, None, DELTA, INCR, {3070: 1}),
    (None, {3070: -1}, None, DELTA, INCR, {}),
]


def test_usage_table_as_a_sequence(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    before: dict[str, int] = {}
    for row, (resource, request, workloads, delta, incr, after) in enumerate(USAGE_SEQUENCE, 1):
        where = f"row {row}: {(resource, request, workloads, delta, incr)}"
        answer = plugin.ok(
            "set-node-resource-usage", usage_request(resource, request, workloads, delta, incr)
        )
        assert set(answer) == {"before", "after"}, where
        assert counts(answer["before"]) == before, where
        assert counts(answer["after"]) == G(after), where
        before = G(after) or {}
    assert state(plugin, "n1") == (EIGHT, {})


A: Spec = {3070: 1}
B: Spec = {3090: 2}
C: Spec = {3070: 2}
D: Spec = {3090: 1}


@pytest.mark.parametrize(
    ("resource", "request_cards", "delta", "after"),
    [
        pytest.param(B, A, ABSOLUTE, {3070: 1}, id="absolute: resource_request wins"),
        pytest.param(B, None, ABSOLUTE, {3090: 2}, id="absolute: then resource"),
        pytest.param(B, A, DELTA, {3070: 5, 3090: 4}, id="delta: resource_request wins"),
        pytest.param(B, None, DELTA, {3070: 4, 3090: 6}, id="delta: then resource"),
    ],
)
def test_capacity_input_priority(
    plugin: Plugin, resource: Spec, request_cards: Spec | None, delta: bool, after: Spec
) -> None:
    plugin.add("n1", EIGHT)
    answer = plugin.ok(
        "set-node-resource-capacity", capacity_request(resource, request_cards, delta, INCR)
    )
    assert counts(answer["after"]) == G(after)


@pytest.mark.parametrize(
    ("resource", "request_cards", "workloads", "delta", "after"),
    [
        pytest.param(B, A, [C, D], ABSOLUTE, A, id="absolute: resource_request wins"),
        pytest.param(B, None, [C, D], ABSOLUTE, B, id="absolute: then resource"),
        pytest.param(None, None, [C, D], ABSOLUTE, {3070: 2, 3090: 1}, id="absolute: workloads"),
        pytest.param(B, A, [C, D], DELTA, A, id="delta: resource_request wins"),
        pytest.param(B, None, [C, D], DELTA, B, id="delta: then resource"),
        pytest.param(None, None, [C, D], DELTA, {3070: 2, 3090: 1}, id="delta: workloads sum"),
    ],
)
def test_usage_input_priority(
    plugin: Plugin,
    resource: Spec | None,
    request_cards: Spec | None,
    workloads: list[Spec],
    delta: bool,
    after: Spec,
) -> None:
    plugin.add("n1", EIGHT)
    answer = plugin.ok(
        "set-node-resource-usage", usage_request(resource, request_cards, workloads, delta, INCR)
    )
    assert counts(answer["before"]) == {}
    assert counts(answer["after"]) == G(after)


START_USAGE = G({3070: 1})


@pytest.fixture(scope="module")
def busy_node(shared_plugin: Plugin) -> Plugin:
    """n1 with capacity {3070:4, 3090:4} and usage {3070:1}; every request below must fail and
    leave it so."""
    shared_plugin.add("n1", EIGHT)
    set_usage(shared_plugin, "n1", START_USAGE)
    return shared_plugin


@pytest.mark.parametrize(
    ("verb", "request_body"),
    [
        pytest.param(
            "set-node-resource-capacity",
            capacity_request(None, {3070: -5}, DELTA, INCR),
            id="capacity: negative count below zero",
        ),
        pytest.param(
            "set-node-resource-capacity",
            capacity_request(None, {3090: 5}, DELTA, DECR),
            id="capacity: decrement below zero",
        ),
        pytest.param(
            "set-node-resource-capacity",
            capacity_request({3080: 1}, None, DELTA, DECR),
            id="capacity: decrement a product the node lacks",
        ),
        pytest.param(
            "set-node-resource-capacity",
            capacity_request(None, {3070: 1, 3090: -5}, DELTA, INCR),
            id="capacity: one product below zero, nothing applied",
        ),
        pytest.param(
            "set-node-resource-capacity",
            capacity_request(None, {3070: -1}, ABSOLUTE, INCR),
            id="capacity: absolute negative",
        ),
        pytest.param(
            "set-node-resource-usage",
            usage_request(None, {3070: 2}, None, DELTA, DECR),
            id="usage: release more than used",
        ),
        pytest.param(
            "set-node-resource-usage",
            usage_request(None, None, [{3090: 1}], DELTA, DECR),
            id="usage: release a product not in use",
        ),
        pytest.param(
            "set-node-resource-usage",
            usage_request(None, None, [{3070: -2, 3090: 1}], DELTA, INCR),
            id="usage: realloc delta below zero",
        ),
        pytest.param(
            "set-node-resource-usage",
            usage_request({3070: -2}, None, None, DELTA, INCR),
            id="usage: negative resource below zero",
        ),
        pytest.param(
            "set-node-resource-usage",
            usage_request({3070: -1}, None, None, ABSOLUTE, INCR),
            id="usage: absolute negative",
        ),
    ],
)
def test_negative_results_fail_and_change_nothing(
    busy_node: Plugin, verb: str, request_body: dict[str, Any]
) -> None:
    events = event_count(busy_node, "n1")
    fails_on(busy_node, verb, request_body, "n1")
    assert state(busy_node, "n1") == (EIGHT, START_USAGE)
    assert event_count(busy_node, "n1") == events


@pytest.mark.parametrize(
    "start", [pytest.param(EIGHT, id="from 8 cards"), pytest.param(None, id="from no cards")]
)
def test_capacity_rollback_round_trip(plugin: Plugin, start: dict[str, int] | None) -> None:
    """Core's node-set rollback: delta=false with the ``before`` it got back, sent verbatim
    in resource_request."""
    plugin.add("n1", start)
    edit = {
        "nodename": "n1",
        "resource_request": R({"nvidia-3070": 2, "nvidia-a100": 1}),
        "delta": True,
        "incr": True,
    }
    before = plugin.ok("set-node-resource-capacity", edit)["before"]
    assert counts(before) == (start or {})
    rollback = {"nodename": "n1", "resource_request": before, "delta": False, "incr": True}
    answer = plugin.ok("set-node-resource-capacity", rollback)
    assert counts(answer["after"]) == (start or {})
    assert state(plugin, "n1") == (start or {}, {})


def test_usage_rollback_round_trip(plugin: Plugin) -> None:
    """Core's partial-failure rollback of usage: resource = before, delta=false."""
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3090: 1}))
    deploy = {
        "nodename": "n1",
        "workloads_resource": [RG({3070: 1}), RG({3070: 1, 3090: 1})],
        "delta": True,
        "incr": True,
    }
    answer = plugin.ok("set-node-resource-usage", deploy)
    assert counts(answer["after"]) == G({3070: 2, 3090: 2})
    rollback = {"nodename": "n1", "resource": answer["before"], "delta": False, "incr": True}
    assert counts(plugin.ok("set-node-resource-usage", rollback)["after"]) == G({3090: 1})
    assert state(plugin, "n1") == (EIGHT, G({3090: 1}))


def test_capacity_below_usage_is_allowed(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 3}))
    shrink = {"nodename": "n1", "resource_request": RG({3070: -3}), "delta": True, "incr": True}
    assert counts(plugin.ok("set-node-resource-capacity", shrink)["after"]) == G({3070: 1, 3090: 4})
    replace = {"nodename": "n1", "resource_request": RG({3090: 1}), "delta": False, "incr": True}
    assert counts(plugin.ok("set-node-resource-capacity", replace)["after"]) == G({3090: 1})
    assert state(plugin, "n1") == (G({3090: 1}), G({3070: 3}))


@pytest.mark.parametrize(
    ("request_body", "product"),
    [
        pytest.param(
            usage_request(None, None, [{3070: 2}, {3070: 2}], DELTA, INCR),
            "nvidia-3070",
            id="deploy: two workloads past the last cards",
        ),
        pytest.param(
            usage_request(None, {3090: 5}, None, DELTA, INCR),
            "nvidia-3090",
            id="resource_request past capacity",
        ),
        pytest.param(
            usage_request(None, None, [{3070: -1, 3090: 5}], DELTA, INCR),
            "nvidia-3090",
            id="realloc delta: one product given back, one past capacity",
        ),
        pytest.param(
            usage_request(None, None, [{3080: 1}], DELTA, INCR),
            "nvidia-3080",
            id="a product the node lacks",
        ),
        pytest.param(
            usage_request(None, None, [{3070: -4}], DELTA, DECR),
            "nvidia-3070",
            id="a release of a negative count takes cards",
        ),
    ],
)
def test_an_increment_past_capacity_is_refused_and_changes_nothing(
    busy_node: Plugin, request_body: dict[str, Any], product: str
) -> None:
    """The ledger is the last line when core's lock does not serialise a node's deploys: no
    increment takes a product past its capacity (usage {3070:1} of {3070:4, 3090:4} here)."""
    events = event_count(busy_node, "n1")
    line = fails_on(
        busy_node, "set-node-resource-usage", request_body, "n1", "would exceed its capacity"
    )
    assert product in line, line
    assert state(busy_node, "n1") == (EIGHT, START_USAGE)
    assert event_count(busy_node, "n1") == events


def test_what_lowers_usage_is_never_refused_past_capacity(plugin: Plugin) -> None:
    """A node shrunk below its usage (allowed) still takes releases, realloc deltas that give
    cards back, and absolute sets (core's rollback) above its capacity."""
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 4, 3090: 1}))
    shrink = {"nodename": "n1", "resource_request": RG({3070: -3}), "delta": True, "incr": True}
    plugin.ok("set-node-resource-capacity", shrink)  # 3070: 1 of capacity, 4 in use
    release = usage_request(None, None, [{3070: 1}], DELTA, DECR)
    assert counts(plugin.ok("set-node-resource-usage", release)["after"]) == G({3070: 3, 3090: 1})
    realloc = usage_request(None, None, [{3070: -1, 3090: 1}], DELTA, INCR)
    assert counts(plugin.ok("set-node-resource-usage", realloc)["after"]) == G({3070: 2, 3090: 2})
    rollback = usage_request({3070: 4, 3090: 1}, None, None, ABSOLUTE, INCR)
    assert counts(plugin.ok("set-node-resource-usage", rollback)["after"]) == G({3070: 4, 3090: 1})
    assert state(plugin, "n1") == (G({3070: 1, 3090: 4}), G({3070: 4, 3090: 1}))
    still_over = usage_request(None, None, [{3070: 1}], DELTA, INCR)
    fails_on(plugin, "set-node-resource-usage", still_over, "n1", "would exceed its capacity")


@pytest.mark.parametrize(
    "cards",
    [{3070: 0}, {3070: 2, 3090: 0}],
    ids=["the only product at zero", "one product at zero"],
)
@pytest.mark.parametrize("field", ["resource_request", "resource"])
def test_zero_cards_in_an_absolute_capacity_set_are_refused(
    plugin: Plugin, cards: Spec, field: str
) -> None:
    """The seed refuses counts of zero or less outside a realloc: a replace that names a
    product with 0 cards would drop it, cards in use or not."""
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3090: 2}))
    events = event_count(plugin, "n1")
    request = {"nodename": "n1", field: RG(cards), "delta": False, "incr": True}
    fails_on(plugin, "set-node-resource-capacity", request, "n1", "must be positive")
    assert state(plugin, "n1") == (EIGHT, G({3090: 2}))
    assert event_count(plugin, "n1") == events
