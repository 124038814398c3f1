"""get-node-resource-info, fix-node-resource, get-nodes-resource-info, set-node-resource-info
(docs/verbs.md; upstream's vectors for each, and ours: a failed fix write fails the verb)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.integration.helpers import (
    EIGHT,
    P3070,
    P3090,
    RG,
    G,
    event_count,
    fails_on,
    set_usage,
    state,
)
from tests.plugin import Plugin, R, counts

pytestmark = pytest.mark.resident


def test_unknown_node(plugin: Plugin) -> None:
    request = {"nodename": "ghost", "workloads_resource": [RG({3070: 1})]}
    result = plugin.run("get-node-resource-info", request)
    assert (result.status, result.stdout.strip(), result.stderr) == (0, "null", "")
    fails_on(plugin, "fix-node-resource", request, "ghost", "not exist")
    assert plugin.run("get-node-resource-info", request).stdout.strip() == "null"  # not created


def test_no_workloads_no_diffs(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    events = event_count(plugin, "n1")
    no_workloads: list[list[Any] | None] = [None, []]
    for workloads in no_workloads:
        request = {"nodename": "n1", "workloads_resource": workloads}
        info = plugin.ok("get-node-resource-info", request)
        assert set(info) == {"capacity", "usage", "diffs"}
        assert (counts(info["capacity"]), counts(info["usage"]), info["diffs"]) == (EIGHT, {}, [])
        fixed = plugin.ok("fix-node-resource", request)
        assert counts(fixed["capacity"]) == EIGHT
        assert counts(fixed["usage"]) == {}
        assert fixed["diffs"] == []
    assert event_count(plugin, "n1") == events


def test_three_diffs_then_fix(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    events = event_count(plugin, "n1")
    request = {"nodename": "n1", "workloads_resource": [RG({3070: 1, 3090: 1})]}
    info = plugin.ok("get-node-resource-info", request)
    diffs = info["diffs"]
    assert len(diffs) == 3, diffs  # the totals, and two products not in usage
    assert all(isinstance(d, str) and d.strip() and "\n" not in d for d in diffs)
    assert sum(P3070 in d for d in diffs) == 1, diffs
    assert sum(P3090 in d for d in diffs) == 1, diffs
    assert sum(P3070 not in d and P3090 not in d for d in diffs) == 1, diffs
    assert counts(info["usage"]) == {}
    assert event_count(plugin, "n1") == events  # get never writes

    fixed = plugin.ok("fix-node-resource", request)
    assert fixed["diffs"] == diffs
    assert counts(fixed["capacity"]) == EIGHT
    assert counts(fixed["usage"]) == G({3070: 1, 3090: 1})
    assert sum(counts(fixed["usage"]).values()) == 2
    assert state(plugin, "n1") == (EIGHT, G({3070: 1, 3090: 1}))
    assert event_count(plugin, "n1") == events + 1

    assert plugin.ok("get-node-resource-info", request)["diffs"] == []
    assert plugin.ok("fix-node-resource", request)["diffs"] == []  # nothing to fix
    assert event_count(plugin, "n1") == events + 1


def test_count_differs_names_both_numbers(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 5, 3090: 1}))
    request = {"nodename": "n1", "workloads_resource": [RG({3070: 2}), RG({3090: 1})]}
    diffs = plugin.ok("get-node-resource-info", request)["diffs"]
    assert len(diffs) == 2, diffs  # the totals (6 vs 3) and nvidia-3070 (5 vs 2)
    (line,) = [d for d in diffs if P3070 in d]
    numbers = re.findall(r"(?<![\w-])\d+(?![\w-])", line.replace(P3070, ""))
    assert {"5", "2"} <= set(numbers), line
    assert not any(P3090 in d for d in diffs), diffs
    fixed = plugin.ok("fix-node-resource", request)
    assert fixed["diffs"] == diffs
    assert counts(fixed["usage"]) == G({3070: 2, 3090: 1})


def test_product_only_in_usage_shows_and_is_fixed(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 1}))
    request = {"nodename": "n1", "workloads_resource": []}
    assert plugin.ok("get-node-resource-info", request)["diffs"] != []
    fixed = plugin.ok("fix-node-resource", request)
    assert fixed["diffs"] != []
    assert counts(fixed["usage"]) == {}
    assert state(plugin, "n1") == (EIGHT, {})


def test_null_workload_entries_count_as_nothing(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3070: 1}))
    workloads = [None, {"prod_count_map": None}, RG({3070: 1}), {}]
    info = plugin.ok("get-node-resource-info", {"nodename": "n1", "workloads_resource": workloads})
    assert info["diffs"] == []


def test_fix_whose_write_fails_fails(plugin: Plugin) -> None:
    """Seed: a fix whose write fails fails the verb, so core keeps its repair entry. A fix of
    5000 long product names makes the write larger than etcd accepts (its default
    --max-request-bytes, 1.5 MiB, which the suite's etcd keeps): the verb must fail, cleanly,
    and leave the node as it was."""
    plugin.add("n1", EIGHT)
    events = event_count(plugin, "n1")
    held = {f"gpu-{i:04d}-{'x' * 200}": 1 for i in range(5000)}
    line = plugin.fails("fix-node-resource", {"nodename": "n1", "workloads_resource": [R(held)]})
    assert line.startswith("resource-gpu fix-node-resource: node n1: ")
    assert state(plugin, "n1") == (EIGHT, {})
    assert event_count(plugin, "n1") == events


def test_set_node_resource_info_creates_and_overwrites(plugin: Plugin) -> None:
    request: dict[str, Any] = {
        "nodename": "node-2",
        "capacity": RG({3070: 2, 3090: 2}),
        "usage": RG({3070: 1}),
    }
    assert plugin.ok("set-node-resource-info", request) == {}
    assert state(plugin, "node-2") == (G({3070: 2, 3090: 2}), G({3070: 1}))
    request.update(capacity=R({"nvidia-a100": 3}), usage=R({"nvidia-a100": 1}))
    assert plugin.ok("set-node-resource-info", request) == {}
    assert state(plugin, "node-2") == ({"nvidia-a100": 3}, {"nvidia-a100": 1})
    request.update(capacity=None, usage=None)
    assert plugin.ok("set-node-resource-info", request) == {}
    assert state(plugin, "node-2") == ({}, {})


def test_get_nodes_resource_info(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", G({3090: 2}))
    plugin.add("n2", None)
    answer = plugin.ok("get-nodes-resource-info", {"nodenames": ["n1", "ghost", "n2"]})
    assert set(answer) == {"node_resource_info_map"}
    found = answer["node_resource_info_map"]
    assert set(found) == {"n1", "ghost", "n2"}  # a node never seen: an empty one
    assert set(found["n1"]) == {"capacity", "usage"}
    assert counts(found["n1"]["capacity"]) == EIGHT
    assert counts(found["n1"]["usage"]) == G({3090: 2})
    assert counts(found["n2"]["capacity"]) == {}
    assert counts(found["n2"]["usage"]) == {}
    assert found["ghost"] == found["n2"]
    only_unknown = plugin.ok("get-nodes-resource-info", {"nodenames": ["ghost"]})
    assert only_unknown["node_resource_info_map"] == {"ghost": found["n2"]}
