"""add-node and remove-node (docs/verbs.md; upstream's vectors for both)."""

from __future__ import annotations

from typing import Any

import pytest

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

pytestmark = pytest.mark.resident


def test_add_existing_node_fails_and_changes_nothing(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    events = event_count(plugin, "n1")
    request = {"nodename": "n1", "resource": RG({3070: 2})}
    fails_on(plugin, "add-node", request, "n1", "node already exists")
    assert state(plugin, "n1") == (EIGHT, {})
    assert event_count(plugin, "n1") == events


def test_add_without_cards_or_info_registers_empty_capacity(plugin: Plugin) -> None:
    answer = plugin.ok("add-node", {"nodename": "xxx", "resource": None, "info": None})
    # upstream: "capacity parses to an empty, non-null map (count 0)"
    assert answer["capacity"] == {"prod_count_map": {}}
    assert counts(answer["usage"]) == {}
    info = plugin.info("xxx")
    assert info is not None
    assert counts(info["capacity"]) == {}
    assert counts(info["usage"]) == {}
    assert info["diffs"] == []


GPU_2 = engine_resource(RG({3070: 2}))


@pytest.mark.parametrize(
    ("resource", "info", "capacity"),
    [
        pytest.param(RG({3070: 2}), None, {3070: 2}, id="request {3070:2}"),
        pytest.param(None, {"Resources": {"gpu": GPU_2}}, {3070: 2}, id="info gpu"),
        pytest.param(
            None, {"Resources": {"resource-gpu": GPU_2}}, {3070: 2}, id="info resource-gpu"
        ),
        pytest.param(
            None,
            {"Resources": {"gpu": engine_resource(RG({3090: 1})), "resource-gpu": GPU_2}},
            {3070: 2},
            id="info resource-gpu preferred over gpu",
        ),
        pytest.param(
            RG({3090: 1}), {"Resources": {"gpu": GPU_2}}, {3090: 1}, id="request cards beat info"
        ),
        pytest.param(
            {"prod_count_map": {}},
            {"Resources": {"gpu": GPU_2}},
            {3070: 2},
            id="empty request map falls back to info",
        ),
        pytest.param(
            {"prod_count_map": None},
            {"Resources": {"resource-gpu": GPU_2}},
            {3070: 2},
            id="null request map falls back to info",
        ),
        pytest.param(None, {"NCPU": 8, "MemTotal": 2048}, {}, id="docker engine info: no GPU"),
        pytest.param(
            None,
            {"NCPU": 8, "MemTotal": 2048, "Resources": None},
            {},
            id="info Resources null",
        ),
        pytest.param(
            None,
            {"Resources": {"cpumem": engine_resource({"cpu": 8})}},
            {},
            id="info of other plugins only",
        ),
        pytest.param(
            None,
            {"Resources": {"gpu": engine_resource({"a": 1})}},
            {},
            id='info gpu JSON {"a":1} (no prod_count_map)',
        ),
    ],
)
def test_add_node_capacity(
    plugin: Plugin, resource: Any, info: Any, capacity: dict[int, int]
) -> None:
    answer = plugin.ok("add-node", {"nodename": "n1", "resource": resource, "info": info})
    assert counts(answer["capacity"]) == G(capacity)
    assert counts(answer["usage"]) == {}
    assert state(plugin, "n1") == (G(capacity), {})


def test_add_node_product_names_are_free_form(plugin: Plugin) -> None:
    # upstream "types": {"nvidia-3070":4, ":nvidia-3090":2} counts 6
    answer = plugin.add("n1", {"nvidia-3070": 4, ":nvidia-3090": 2})
    assert counts(answer["capacity"]) == {"nvidia-3070": 4, ":nvidia-3090": 2}
    assert sum(counts(answer["capacity"]).values()) == 6


def test_remove_node(plugin: Plugin) -> None:
    assert plugin.ok("remove-node", {"nodename": "ghost"}) == {}  # missing: ok
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 1}))
    assert plugin.ok("remove-node", {"nodename": "n1"}) == {}
    assert plugin.ok("remove-node", {"nodename": "n1"}) == {}  # twice: ok
    result = plugin.run("get-node-resource-info", {"nodename": "n1"})
    assert (result.status, result.stdout.strip(), result.stderr) == (0, "null", "")
    nodes = plugin.ok("get-nodes-resource-info", {"nodenames": ["n1"]})
    empty = {"capacity": R({}), "usage": R({})}  # a removed node is an empty one
    assert nodes["node_resource_info_map"] == {"n1": empty}


def test_removed_node_can_be_added_again_fresh(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 2}))
    plugin.ok("remove-node", {"nodename": "n1"})
    answer = plugin.ok("add-node", {"nodename": "n1", "resource": R(G({3090: 1}))})
    assert counts(answer["capacity"]) == G({3090: 1})
    assert state(plugin, "n1") == (G({3090: 1}), {})
