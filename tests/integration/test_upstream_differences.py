"""Where a request could be read differently from the upstream Go plugin (resource-gpu at
785f554, run side by side with this one on the same inputs): the three cases core could feel,
pinned. docs/differences.md ("resource-gpu") says why each is as it is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.etcdkv import Etcd
from tests.integration.helpers import (
    EIGHT,
    RG,
    G,
    engine_resource,
    event_count,
    fails_on,
    set_usage,
    state,
)
from tests.plugin import Plugin, R, counts

# -- 1. A replace that names no cards keeps the capacity -----------------------------------


def test_a_replace_without_prod_count_map_keeps_the_capacity(plugin: Plugin) -> None:
    """``node set --extra-resources '{"resource-gpu": {}}'`` sends ``resource_request: {}`` with
    ``delta: false``: upstream keeps the capacity (only a present ``prod_count_map`` replaces
    it). So does this plugin, and it appends nothing."""
    plugin.add("n1", EIGHT)
    events = event_count(plugin, "n1")
    request = {"nodename": "n1", "resource_request": {}, "delta": False, "incr": True}
    answer = plugin.ok("set-node-resource-capacity", request)
    assert counts(answer["before"]) == counts(answer["after"]) == EIGHT
    assert state(plugin, "n1") == (EIGHT, {})
    assert event_count(plugin, "n1") == events


@pytest.mark.parametrize(
    "resource_request",
    [
        pytest.param({"prod_count_map": {}}, id="an empty map"),
        pytest.param({"prod_count_map": None}, id="null"),
    ],
)
def test_a_replace_with_prod_count_map_replaces_even_when_empty(
    plugin: Plugin, resource_request: dict[str, Any]
) -> None:
    plugin.add("n1", EIGHT)
    request = {"nodename": "n1", "resource_request": resource_request, "delta": False}
    assert counts(plugin.ok("set-node-resource-capacity", request)["after"]) == {}
    assert state(plugin, "n1") == ({}, {})


def test_only_resource_request_keeps_the_capacity_when_it_names_no_cards(plugin: Plugin) -> None:
    """Upstream merges the stored map only into ``resource_request``; ``resource: {}`` and a
    request with no input at all replace the capacity with nothing, as they do upstream."""
    plugin.add("n1", EIGHT)
    plugin.ok("set-node-resource-capacity", {"nodename": "n1", "resource": {}, "delta": False})
    assert state(plugin, "n1") == ({}, {})
    plugin.ok("set-node-resource-capacity", {"nodename": "n1", "resource": R(EIGHT)})
    plugin.ok("set-node-resource-capacity", {"nodename": "n1", "delta": False})
    assert state(plugin, "n1") == ({}, {})


def test_a_replace_without_prod_count_map_on_an_unknown_node_keeps_it_empty(
    plugin: Plugin,
) -> None:
    """A node the plugin never saw is an empty one (resource-extend): keeping its capacity
    keeps it empty, and writes nothing."""
    request = {"nodename": "ghost", "resource_request": {}, "delta": False}
    answer = plugin.ok("set-node-resource-capacity", request)
    assert answer == {"before": R({}), "after": R({})}
    assert plugin.info("ghost") is None


# -- 2. A field spelt in another case is refused, never read as empty ----------------------

MISCASED = {"Prod_Count_Map": {"nvidia-3070": 1}}


@pytest.mark.parametrize(
    ("verb", "request_"),
    [
        pytest.param("add-node", {"nodename": "n2", "resource": MISCASED}, id="add-node"),
        pytest.param(
            "calculate-deploy",
            {"nodename": "n1", "deploy_count": 1, "workload_resource_request": MISCASED},
            id="calculate-deploy",
        ),
        pytest.param(
            "calculate-realloc",
            {"nodename": "n1", "workload_resource": MISCASED},
            id="calculate-realloc",
        ),
        pytest.param(
            "set-node-resource-capacity",
            {"nodename": "n1", "resource_request": MISCASED, "delta": False},
            id="set-node-resource-capacity",
        ),
        pytest.param(
            "set-node-resource-usage",
            {"nodename": "n1", "workloads_resource": [R(EIGHT), MISCASED], "delta": True},
            id="set-node-resource-usage, a workload",
        ),
        pytest.param(
            "fix-node-resource",
            {"nodename": "n1", "workloads_resource": [{"PROD_COUNT_MAP": {"x": 1}}]},
            id="fix-node-resource",
        ),
        pytest.param(
            "set-node-resource-info",
            {"nodename": "n1", "capacity": R(EIGHT), "usage": {"prod_Count_map": {}}},
            id="set-node-resource-info",
        ),
    ],
)
def test_a_field_spelt_in_another_case_is_refused(
    plugin: Plugin, verb: str, request_: dict[str, Any]
) -> None:
    """Upstream matches field names case-insensitively; read as an unknown key here, the map
    would be empty (a deploy without its cards, a node with none). It fails in one line naming
    the key, and nothing is written."""
    plugin.add("n1", EIGHT)
    events = event_count(plugin, "n1")
    line = fails_on(plugin, verb, request_, request_["nodename"], "it is spelled 'prod_count_map'")
    assert "prod_count_map" in line.lower()
    assert state(plugin, "n1") == (EIGHT, {})
    assert event_count(plugin, "n1") == events
    assert plugin.info("n2") is None


def test_a_field_spelt_in_another_case_is_refused_in_an_engine_report(plugin: Plugin) -> None:
    info = {"Resources": {"resource-gpu": engine_resource(MISCASED)}}
    line = fails_on(plugin, "add-node", {"nodename": "vm", "info": info}, "vm")
    assert "info.Resources['resource-gpu']" in line and "Prod_Count_Map" in line
    assert plugin.info("vm") is None


@pytest.mark.parametrize("key", ["resources", "RESOURCES", "storagetotal"])
def test_the_engine_reports_own_fields_spelt_in_another_case_are_refused(
    plugin: Plugin, key: str
) -> None:
    """Go reads ``{"resources": ...}`` as the engine's ``Resources``; read as an unknown key
    here, the engine's cards would be silently dropped (and a count of -1 there never
    refused). Core sends Go's field names, so another spelling is refused in one line."""
    for cards in ({"nvidia-3070": 2}, {"nvidia-3070": -1}):
        info = {key: {"gpu": engine_resource(R(cards))}}
        line = fails_on(plugin, "add-node", {"nodename": "vm", "info": info}, "vm", key)
        assert "is not a field: it is spelled" in line
        assert plugin.info("vm") is None


def test_a_negative_count_in_the_engine_report_is_refused(plugin: Plugin) -> None:
    info = {"Resources": {"gpu": engine_resource(R({"nvidia-3070": -1}))}}
    fails_on(plugin, "add-node", {"nodename": "vm", "info": info}, "vm", "nvidia-3070")
    assert plugin.info("vm") is None


@pytest.mark.parametrize("side", ["capacity", "usage"])
def test_set_node_resource_info_with_a_count_of_zero_is_refused(
    plugin: Plugin, etcd: Etcd, side: str
) -> None:
    """Core's undo of a failed node removal hands back what it read, which names no product
    with 0 cards. Upstream refuses a 0 (``count is less or equal to zero``); taken as given it
    dropped the product here. Refused, and the record is unchanged."""
    plugin.add("n1", {"a": 4, "b": 2})
    head = etcd.head("n1")
    assert head is not None
    given = {"capacity": R({"a": 4, "b": 2}), "usage": R({})}
    given[side] = R({"a": 4, "b": 0}) if side == "capacity" else R({"x": 0})
    line = fails_on(plugin, "set-node-resource-info", {"nodename": "n1", **given}, "n1")
    assert "must be positive, got 0" in line
    after = etcd.head("n1")
    assert (
        after is not None and after.value == head.value and after.mod_revision == head.mod_revision
    )


def test_a_field_spelt_in_another_case_is_refused_however_it_is_escaped(plugin: Plugin) -> None:
    raw = b'{"nodename": "n2", "resource": {"Prod\\u005fCount_Map": {"nvidia-3070": 1}}}'
    assert json.loads(raw)["resource"] == MISCASED
    line = plugin.fails("add-node", raw=raw)
    assert line.startswith("resource-gpu add-node: node n2: ")
    assert "it is spelled 'prod_count_map'" in line
    assert plugin.info("n2") is None


def test_products_that_spell_the_field_are_products(plugin: Plugin) -> None:
    """Inside ``prod_count_map`` every key is a product, whatever it spells."""
    cards = {"Prod_Count_Map": 1, "nvidia-3070": 2}
    assert (
        counts(plugin.ok("add-node", {"nodename": "odd", "resource": R(cards)})["capacity"])
        == cards
    )


# -- 3. Realloc on an over-committed node: only growth must fit ----------------------------


@pytest.fixture
def overcommitted(plugin: Plugin) -> Plugin:
    """n1 shrunk below its usage: capacity {3070: 1}, usage {3070: 3}."""
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 3}))
    replace = {"nodename": "n1", "resource_request": RG({3070: 1}), "delta": False}
    plugin.ok("set-node-resource-capacity", replace)
    assert state(plugin, "n1") == (G({3070: 1}), G({3070: 3}))
    return plugin


@pytest.mark.parametrize(
    ("change", "new"),
    [
        pytest.param(None, {3070: 2}, id="unchanged (a realloc of other resources)"),
        pytest.param({3070: -1}, {3070: 1}, id="a card given back"),
    ],
)
def test_a_realloc_that_does_not_grow_succeeds_on_an_overcommitted_node(
    overcommitted: Plugin, change: dict[int, int] | None, new: dict[int, int]
) -> None:
    """Core asks every plugin on every realloc, so upstream's rule (the whole new request must
    fit what is available plus what the workload holds) fails a CPU-only realloc, and the one
    that gives cards back, of any workload holding cards on such a node. Here neither needs
    cards the node does not have, and both succeed."""
    request = {
        "nodename": "n1",
        "workload_resource": RG({3070: 2}),
        "workload_resource_request": RG(change),
    }
    answer = overcommitted.ok("calculate-realloc", request)
    assert counts(answer["workload_resource"]) == G(new)


def test_a_realloc_that_grows_must_fit_on_an_overcommitted_node(overcommitted: Plugin) -> None:
    request = {
        "nodename": "n1",
        "workload_resource": RG({3070: 2}),
        "workload_resource_request": RG({3070: 1}),
    }
    fails_on(overcommitted, "calculate-realloc", request, "n1", "not enough resource")


# -- The deliberate differences docs/differences.md lists, where no other test pins them ----


def test_null_delta_and_incr_mean_false_and_other_non_booleans_are_refused(plugin: Plugin) -> None:
    """Upstream reads any present non-boolean ``delta``/``incr`` as true, so ``"false"`` would
    add where a replace was meant. Here ``null`` is absent (false), as everywhere, and anything
    else is refused."""
    plugin.add("n1", EIGHT)
    replace = {"nodename": "n1", "resource_request": RG({3070: 1}), "delta": None, "incr": None}
    assert counts(plugin.ok("set-node-resource-capacity", replace)["after"]) == G({3070: 1})
    events = event_count(plugin, "n1")
    not_booleans: list[object] = ["false", 0, 1, [], {}]
    for bad in not_booleans:
        request = {**replace, "delta": bad}
        fails_on(plugin, "set-node-resource-capacity", request, "n1", "delta")
    assert state(plugin, "n1") == (G({3070: 1}), {})
    assert event_count(plugin, "n1") == events
