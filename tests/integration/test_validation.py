"""Request decoding and validation, as core sends requests and as upstream's type and
plugincmd tests check them, and the one-line failure form (docs/verbs.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.helpers import EIGHT, RG, event_count, fails_on, state
from tests.plugin import Plugin, R, counts

NODE_VERBS = [
    "add-node",
    "remove-node",
    "set-node-resource-capacity",
    "set-node-resource-usage",
    "set-node-resource-info",
    "fix-node-resource",
    "calculate-deploy",
    "calculate-realloc",
    "get-node-resource-info",
    "get-metrics",
]


@pytest.mark.parametrize("verb", NODE_VERBS)
def test_node_scoped_verbs_need_a_node_name(plugin: Plugin, verb: str) -> None:
    for request in ({}, {"nodename": ""}, {"nodename": None}):
        assert "node name is empty" in plugin.fails(verb, request), request


@pytest.mark.parametrize(
    "verb", ["add-node", "get-node-resource-info", "set-node-resource-info", "remove-node"]
)
def test_node_names_with_a_slash_are_rejected(plugin: Plugin, verb: str) -> None:
    plugin.fails(verb, {"nodename": "a/b", "resource": R(EIGHT)})


@pytest.fixture(scope="module")
def n1(shared_plugin: Plugin) -> Plugin:
    shared_plugin.add("n1", EIGHT)
    return shared_plugin


BAD_MAPS = [
    pytest.param({"nvidia-3070": 1.5}, id="float"),
    pytest.param({"nvidia-3070": "2"}, id="string"),
    pytest.param({"nvidia-3070": True}, id="boolean"),
    pytest.param({"nvidia-3070": None}, id="null"),
    pytest.param({"  ": 1}, id="whitespace product"),
    pytest.param({"": 1}, id="empty product"),
]


@pytest.mark.parametrize(
    "bad", [*BAD_MAPS, pytest.param({"x": 0}, id="zero"), pytest.param({"x": -1}, id="negative")]
)
def test_add_node_rejects_bad_cards(n1: Plugin, bad: dict[str, Any]) -> None:
    fails_on(n1, "add-node", {"nodename": "bad", "resource": R(bad)}, "bad")
    assert n1.run("get-node-resource-info", {"nodename": "bad"}).stdout.strip() == "null"


@pytest.mark.parametrize("bad", BAD_MAPS)
def test_realloc_request_rejects_bad_cards(n1: Plugin, bad: dict[str, Any]) -> None:
    request = {
        "nodename": "n1",
        "workload_resource": RG({3070: 1}),
        "workload_resource_request": R(bad),
    }
    fails_on(n1, "calculate-realloc", request, "n1")


@pytest.mark.parametrize("bad", BAD_MAPS)
def test_usage_rejects_bad_cards(n1: Plugin, bad: dict[str, Any]) -> None:
    events = event_count(n1, "n1")
    request = {"nodename": "n1", "workloads_resource": [R(bad)], "delta": True, "incr": True}
    fails_on(n1, "set-node-resource-usage", request, "n1")
    assert state(n1, "n1") == (EIGHT, {})
    assert event_count(n1, "n1") == events


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"{not json", id="not JSON"),
        pytest.param(b'{"nodename": "n1", "resource": ', id="truncated"),
        pytest.param(
            b'{"nodename": "n1", "resource": {"prod_count_map": 3}}', id="map is a number"
        ),
        pytest.param(b'{"nodename": 7}', id="node name is a number"),
    ],
)
def test_malformed_requests_fail_in_one_line(plugin: Plugin, raw: bytes) -> None:
    plugin.fails("add-node", raw=raw)


def test_unknown_keys_are_ignored(plugin: Plugin) -> None:
    request = {
        "nodename": "n1",
        "resource": {"prod_count_map": EIGHT, "extra": [1, 2]},
        "info": {"NCPU": 8, "MemTotal": 2048, "Name": "n1"},
        "something_new": {"a": 1},
    }
    assert counts(plugin.ok("add-node", request)["capacity"]) == EIGHT
    info = plugin.ok("get-node-resource-info", {"nodename": "n1", "podname": "p", "x": None})
    assert counts(info["capacity"]) == EIGHT


def test_etcd_unreachable_fails_in_one_line(plugin: Plugin) -> None:
    """The plugin bounds its etcd waits and fails with a message naming verb and node."""
    plugin.write_config(machines=["http://127.0.0.1:1"])  # nothing listens there
    fails_on(plugin, "get-node-resource-info", {"nodename": "n1"}, "n1")
    fails_on(plugin, "add-node", {"nodename": "n1", "resource": R(EIGHT)}, "n1")
