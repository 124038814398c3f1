"""get-most-idle-node, get-metrics-description, get-metrics, name, verbs (docs/verbs.md;
upstream's vectors for the first two and the metrics; ours: ties go to the first by name, the
statsd key carries the product, dots become underscores)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.helpers import EIGHT, P3070, P3090, G, fails_on, set_usage
from tests.plugin import Plugin

pytestmark = pytest.mark.resident

LABELS = ["podname", "nodename", "product"]
CONTRACT_VERBS = {
    "calculate-deploy",
    "calculate-realloc",
    "add-node",
    "remove-node",
    "get-nodes-deploy-capacity",
    "set-node-resource-capacity",
    "set-node-resource-usage",
    "get-node-resource-info",
    "fix-node-resource",
    "get-nodes-resource-info",
    "set-node-resource-info",
    "get-most-idle-node",
    "get-metrics-description",
    "get-metrics",
    "name",
    "verbs",
}
"""Every verb core may call, except calculate-remap (not offered, as upstream)."""


@pytest.fixture(scope="module")
def nodes(shared_plugin: Plugin) -> Plugin:
    """8-card nodes a, b (idle), node-1 (idle), node-2 (usage {3070:1}), big (3 of 8 used);
    small: 2 cards, 1 used; e1, e2: no cards."""
    for node in ("b", "a", "node-1", "node-2", "big"):
        shared_plugin.add(node, EIGHT)
    shared_plugin.add("small", G({3070: 2}))
    for node in ("e2", "e1"):
        shared_plugin.add(node, None)
    set_usage(shared_plugin, "node-2", G({3070: 1}))
    set_usage(shared_plugin, "big", G({3070: 2, 3090: 1}))
    set_usage(shared_plugin, "small", G({3070: 1}))
    return shared_plugin


@pytest.mark.parametrize(
    ("nodenames", "chosen"),
    [
        pytest.param(["node-1", "node-2"], "node-1", id="upstream: node 2 in use"),
        pytest.param(["node-2", "node-1"], "node-1", id="upstream, listed later"),
        pytest.param(["a", "b"], "a", id="tie: first by name"),
        pytest.param(["b", "a"], "a", id="tie: first by name even when listed later"),
        pytest.param(["b", "node-1", "a"], "a", id="three-way tie"),
        pytest.param(["small", "big"], "big", id="lowest ratio, not fewest cards used"),
        pytest.param(["node-2", "e2"], "e2", id="no cards counts as 0"),
        pytest.param(["e2", "e1"], "e1", id="no-card tie: first by name"),
        pytest.param(["b", "e2"], "b", id="idle 8-card vs no cards: tie, first by name"),
        pytest.param(["node-2"], "node-2", id="single node"),
    ],
)
def test_most_idle_node(nodes: Plugin, nodenames: list[str], chosen: str) -> None:
    answer = nodes.ok("get-most-idle-node", {"nodenames": nodenames})
    assert answer == {"nodename": chosen, "priority": 100}


def test_most_idle_reads_an_unknown_node_as_an_empty_one(nodes: Plugin) -> None:
    names = {"nodenames": ["node-1", "node-2", "xxx"]}
    answer = nodes.ok("get-most-idle-node", names)
    nodes.add("xxx", None)
    assert nodes.ok("get-most-idle-node", names) == answer


@pytest.mark.parametrize(
    "request_body", [pytest.param({"nodenames": []}, id="empty"), pytest.param({}, id="missing")]
)
def test_most_idle_without_nodes(plugin: Plugin, request_body: dict[str, Any]) -> None:
    assert "node name is empty" in plugin.fails("get-most-idle-node", request_body)


def test_metrics_description(plugin: Plugin) -> None:
    answer = plugin.ok("get-metrics-description", {})
    assert [d["name"] for d in answer] == ["gpu_capacity", "gpu_used"]
    for description in answer:
        assert set(description) == {"name", "help", "type", "labels"}
        assert description["type"] == "gauge"
        assert description["labels"] == LABELS
        assert isinstance(description["help"], str) and description["help"]


def check_metric_shape(metric: dict[str, Any]) -> None:
    assert set(metric) == {"name", "labels", "key", "value"}, metric
    assert len(metric["labels"]) == len(LABELS), metric  # core panics otherwise
    assert isinstance(metric["value"], str) and metric["value"].isdigit(), metric


def test_metrics_of_an_8_card_node(nodes: Plugin) -> None:
    answer = nodes.ok("get-metrics", {"podname": "testpod", "nodename": "node-1"})
    assert len(answer) == 4  # one pair per product
    for metric in answer:
        check_metric_shape(metric)
        assert metric["labels"][0] == "testpod"
        assert metric["labels"][1] == "node-1"
        assert metric["labels"][2] in {P3070, P3090}
    by_key = {m["key"]: (m["name"], m["labels"][2], m["value"]) for m in answer}
    assert by_key == {
        "core.node.node-1.gpu.nvidia-3070.capacity": ("gpu_capacity", P3070, "4"),
        "core.node.node-1.gpu.nvidia-3070.used": ("gpu_used", P3070, "0"),
        "core.node.node-1.gpu.nvidia-3090.capacity": ("gpu_capacity", P3090, "4"),
        "core.node.node-1.gpu.nvidia-3090.used": ("gpu_used", P3090, "0"),
    }


def test_metrics_keys_replace_dots_and_values_follow_usage(plugin: Plugin) -> None:
    plugin.add("gpu.node.1", {"nvidia.a100": 2, "nvidia-3070": 12})
    set_usage(plugin, "gpu.node.1", {"nvidia.a100": 1})
    answer = plugin.ok("get-metrics", {"podname": "pod.a", "nodename": "gpu.node.1"})
    for metric in answer:
        check_metric_shape(metric)
        assert metric["labels"][:2] == ["pod.a", "gpu.node.1"]
    by_key = {m["key"]: (m["name"], m["labels"][2], m["value"]) for m in answer}
    assert by_key == {
        "core.node.gpu_node_1.gpu.nvidia_a100.capacity": ("gpu_capacity", "nvidia.a100", "2"),
        "core.node.gpu_node_1.gpu.nvidia_a100.used": ("gpu_used", "nvidia.a100", "1"),
        "core.node.gpu_node_1.gpu.nvidia-3070.capacity": ("gpu_capacity", "nvidia-3070", "12"),
        "core.node.gpu_node_1.gpu.nvidia-3070.used": ("gpu_used", "nvidia-3070", "0"),
    }


def test_metrics_only_for_products_in_capacity(plugin: Plugin) -> None:
    request = {
        "nodename": "n1",
        "capacity": {"prod_count_map": {P3070: 2}},
        "usage": {"prod_count_map": {P3070: 1, P3090: 1}},
    }
    plugin.ok("set-node-resource-info", request)
    answer = plugin.ok("get-metrics", {"podname": "p", "nodename": "n1"})
    assert sorted((m["name"], m["labels"][2], m["value"]) for m in answer) == [
        ("gpu_capacity", P3070, "2"),
        ("gpu_used", P3070, "1"),
    ]
    plugin.add("empty", None)
    assert plugin.ok("get-metrics", {"podname": "p", "nodename": "empty"}) == []
    # a node the plugin never saw is an empty one
    assert plugin.ok("get-metrics", {"podname": "p", "nodename": "never-seen"}) == []


@pytest.mark.parametrize(
    ("request_body", "node"),
    [
        pytest.param({"podname": "", "nodename": ""}, None, id='("", "")'),
    ],
)
def test_metrics_errors(nodes: Plugin, request_body: dict[str, Any], node: str | None) -> None:
    if node is None:
        nodes.fails("get-metrics", request_body)
    else:
        fails_on(nodes, "get-metrics", request_body, node)


def test_metrics_batched(nodes: Plugin) -> None:
    request = {
        "nodes": [
            {"podname": "pod1", "nodename": "node-1"},
            {"podname": "pod2", "nodename": "node-2"},
            {"podname": "pod2", "nodename": "small"},
        ]
    }
    answer = nodes.ok("get-metrics", request)
    assert isinstance(answer, list) and len(answer) == 4 + 4 + 2  # one flat array
    for metric in answer:
        check_metric_shape(metric)
    values = {m["key"]: (m["labels"][0], m["value"]) for m in answer}
    assert values["core.node.node-1.gpu.nvidia-3070.used"] == ("pod1", "0")
    assert values["core.node.node-2.gpu.nvidia-3070.used"] == ("pod2", "1")
    assert values["core.node.node-2.gpu.nvidia-3090.capacity"] == ("pod2", "4")
    assert values["core.node.small.gpu.nvidia-3070.capacity"] == ("pod2", "2")
    assert values["core.node.small.gpu.nvidia-3070.used"] == ("pod2", "1")


def test_name_and_verbs(plugin: Plugin) -> None:
    assert plugin.ok("name", {}) == "gpu"  # as upstream and resource-extend
    verbs = plugin.ok("verbs", {})
    assert isinstance(verbs, list) and len(verbs) == len(set(verbs))
    assert set(verbs) == CONTRACT_VERBS
    assert "calculate-remap" not in verbs


def test_name_and_verbs_need_no_config_or_etcd(plugin: Plugin) -> None:
    plugin.config.unlink()
    assert plugin.ok("name", {}) == "gpu"
    assert set(plugin.ok("verbs", {})) == CONTRACT_VERBS
    plugin.write_config(machines=["http://127.0.0.1:1"])  # nothing listens there
    assert plugin.ok("name", {}) == "gpu"
    assert set(plugin.ok("verbs", {})) == CONTRACT_VERBS
