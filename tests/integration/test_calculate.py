"""calculate-deploy, calculate-realloc, calculate-remap (docs/verbs.md; upstream's vectors for
each, and the realloc table of the product's description)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.helpers import EIGHT, RG, G, Spec, event_count, fails_on, set_usage, state
from tests.plugin import Plugin, R, counts

pytestmark = pytest.mark.resident


@pytest.fixture(scope="module")
def node(shared_plugin: Plugin) -> Plugin:
    """``n1``: one 8-card node, nothing used; ``r1``: 8 cards, usage set absolutely to
    ``{3070:1, 3090:1}`` (the realloc fixture)."""
    shared_plugin.add("n1", EIGHT)
    shared_plugin.add("r1", EIGHT)
    set_usage(shared_plugin, "r1", G({3070: 1, 3090: 1}))
    return shared_plugin


def deploy(nodename: str, count: int, request: Any) -> dict[str, Any]:
    return {"nodename": nodename, "deploy_count": count, "workload_resource_request": request}


EMPTY_ENTRY: dict[str, Any] = {"prod_count_map": {}}


@pytest.mark.parametrize(
    ("count", "request_body", "entry"),
    [
        pytest.param(4, None, EMPTY_ENTRY, id="null request x4"),
        pytest.param(3, {"prod_count_map": {}}, EMPTY_ENTRY, id="empty map x3"),
        pytest.param(2, {"prod_count_map": None}, None, id="null map x2"),
        pytest.param(2, {"prod_count_map1": None}, None, id="unknown key only x2"),
        pytest.param(4, RG({3070: 1, 3090: 1}), RG({3070: 1, 3090: 1}), id="{3070:1,3090:1} x4"),
        pytest.param(1, RG({3070: 4}), RG({3070: 4}), id="{3070:4} x1"),
        pytest.param(2, RG({3070: 2, 3090: 1}), RG({3070: 2, 3090: 1}), id="{3070:2,3090:1} x2"),
        pytest.param(1, RG({3090: 1}), RG({3090: 1}), id="{3090:1} x1"),
    ],
)
def test_deploy_plans_exactly_deploy_count(
    node: Plugin, count: int, request_body: Any, entry: Any
) -> None:
    answer = node.ok("calculate-deploy", deploy("n1", count, request_body))
    assert set(answer) == {"engines_params", "workloads_resource"}
    for key in ("engines_params", "workloads_resource"):
        assert len(answer[key]) == count, key
        for item in answer[key]:
            if entry is None:
                assert counts(item) == {}
            else:
                assert item == entry


@pytest.mark.parametrize(
    ("count", "request_cards"),
    [
        pytest.param(5, {3070: 1, 3090: 1}, id="{3070:1,3090:1} x5"),
        pytest.param(2, {3070: 4}, id="{3070:4} x2"),
        pytest.param(3, {3070: 2, 3090: 1}, id="{3070:2,3090:1} x3"),
        pytest.param(1, {3070: 5}, id="{3070:5} x1"),
        pytest.param(1, {3080: 1}, id="a product the node lacks"),
    ],
)
def test_deploy_not_enough(node: Plugin, count: int, request_cards: Spec) -> None:
    fails_on(node, "calculate-deploy", deploy("n1", count, RG(request_cards)), "n1", "not enough")


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(RG({3070: -1, 3090: 1}), id="{3070:-1,3090:1}"),
        pytest.param({"prod_count_map": {"  ": 1}}, id="blank product"),
        pytest.param(RG({3070: 0}), id="zero count"),
    ],
)
def test_deploy_invalid_request(node: Plugin, request_body: Any) -> None:
    fails_on(node, "calculate-deploy", deploy("n1", 100, request_body), "n1", "invalid")


def test_deploy_upstream_invalid_gpu_map(node: Plugin) -> None:
    request = deploy("n1", 100, RG({3070: -1, 3090: 1}))
    fails_on(node, "calculate-deploy", request, "n1", "invalid gpu map")


def test_deploy_on_an_unknown_node_is_on_an_empty_one(node: Plugin) -> None:
    """A node the plugin never saw has no cards: a deploy that asks for none is planned."""
    fails_on(node, "calculate-deploy", deploy("xxx", 1, RG({3070: 1})), "xxx", "available none")
    answer = node.ok("calculate-deploy", deploy("xxx", 2, None))
    assert answer["workloads_resource"] == answer["engines_params"] == [R({})] * 2


def test_deploy_counts_only_available_cards(node: Plugin) -> None:
    # r1 uses {3070:1, 3090:1}: 3 of each are available
    assert len(node.ok("calculate-deploy", deploy("r1", 3, RG({3070: 1})))["engines_params"]) == 3
    fails_on(node, "calculate-deploy", deploy("r1", 4, RG({3070: 1})), "r1", "not enough")


# current, request -> engine (= new workload resource), delta
UPSTREAM_REALLOC = [
    pytest.param(None, None, {}, {}, id="null + null"),
    pytest.param({3090: 1}, None, {3090: 1}, {}, id="{3090:1} + null"),
    pytest.param({3090: 1}, {3090: 2}, {3090: 3}, {3090: 2}, id="{3090:1} + {3090:2}"),
    pytest.param(
        {3090: 1},
        {3090: 1, 3070: 1},
        {3090: 2, 3070: 1},
        {3090: 1, 3070: 1},
        id="{3090:1} + {3090:1,3070:1}",
    ),
    pytest.param(
        {3090: 1},
        {3090: -1, 3070: 1},
        {3070: 1},
        {3070: 1, 3090: -1},
        id="{3090:1} + {3090:-1,3070:1}",
    ),
    pytest.param(
        {3090: 1},
        {3090: -5, 3070: 1},
        {3070: 1},
        {3070: 1, 3090: -1},
        id="{3090:1} + {3090:-5,3070:1} clamps",
    ),
]
SEED_REALLOC = [
    pytest.param({3090: 1}, {}, {3090: 1}, {}, id="seed {3090:1} + {}"),
    pytest.param({3090: 1}, {3090: 2}, {3090: 3}, {3090: 2}, id="seed {3090:1} + {3090:2}"),
    pytest.param(
        {3090: 1}, {3090: -1, 3070: 1}, {3070: 1}, {3070: 1, 3090: -1}, id="seed give back one"
    ),
    pytest.param(
        {3090: 1}, {3090: -5, 3070: 1}, {3070: 1}, {3070: 1, 3090: -1}, id="seed give back five"
    ),
]
MORE_REALLOC = [
    # new must fit available (3 of 3090 on r1) plus what the workload holds (1): up to 4
    pytest.param({3090: 1}, {3090: 3}, {3090: 4}, {3090: 3}, id="grow to all it may hold"),
    pytest.param({3070: 1}, {3070: -1}, {}, {3070: -1}, id="give back everything"),
    pytest.param(None, {3070: 3}, {3070: 3}, {3070: 3}, id="new workload takes all available"),
]


@pytest.mark.parametrize(
    ("current", "request_cards", "new", "delta"), UPSTREAM_REALLOC + SEED_REALLOC + MORE_REALLOC
)
def test_realloc_table(
    node: Plugin, current: Spec | None, request_cards: Spec | None, new: Spec, delta: Spec
) -> None:
    request = {
        "nodename": "r1",
        "workload_resource": RG(current),
        "workload_resource_request": RG(request_cards),
    }
    answer = node.ok("calculate-realloc", request)
    assert set(answer) == {"engine_params", "workload_resource", "delta_resource"}
    assert counts(answer["engine_params"]) == G(new)
    assert counts(answer["workload_resource"]) == G(new)
    assert counts(answer["delta_resource"]) == G(delta)


@pytest.mark.parametrize(
    ("current", "request_cards"),
    [
        pytest.param({3090: 1}, {3090: 4}, id="{3090:1} + {3090:4}"),
        pytest.param(None, {3070: 4}, id="null + {3070:4}"),
        pytest.param({3070: 1}, {3080: 1}, id="a product the node lacks"),
    ],
)
def test_realloc_not_enough(node: Plugin, current: Spec | None, request_cards: Spec) -> None:
    request = {
        "nodename": "r1",
        "workload_resource": RG(current),
        "workload_resource_request": RG(request_cards),
    }
    fails_on(node, "calculate-realloc", request, "r1", "not enough")


def test_realloc_unknown_node(node: Plugin) -> None:
    request = {
        "nodename": "xxx",
        "workload_resource": RG({3090: 1}),
        "workload_resource_request": RG({3090: 1}),
    }
    fails_on(node, "calculate-realloc", request, "xxx", "available none")
    request["workload_resource"] = request["workload_resource_request"] = None
    assert counts(node.ok("calculate-realloc", request)["delta_resource"]) == {}


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param({}, id="empty request"),
        pytest.param({"nodename": "n1", "workload_resource": RG({3070: 1})}, id="with a node"),
    ],
)
def test_remap_is_not_offered_but_answers(node: Plugin, request_body: Any) -> None:
    answer = node.ok("calculate-remap", request_body)
    assert answer in ({"engine_params_map": None}, {})


def test_pure_verbs_never_write(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    plugin.add("n2", None)
    set_usage(plugin, "n1", G({3070: 1, 3090: 1}))
    before = plugin.history("n1")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("calculate-deploy", deploy("n1", 2, RG({3070: 1}))),
        ("calculate-deploy", deploy("n1", 9, RG({3070: 1}))),  # fails: not enough
        ("calculate-deploy", deploy("n1", 1, RG({3070: -1}))),  # fails: invalid
        (
            "calculate-realloc",
            {
                "nodename": "n1",
                "workload_resource": RG({3090: 1}),
                "workload_resource_request": RG({3090: -1, 3070: 2}),
            },
        ),
        ("calculate-remap", {"nodename": "n1"}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n1", "n2"], "workload_resource": None}),
        ("get-most-idle-node", {"nodenames": ["n1", "n2"]}),
        ("get-node-resource-info", {"nodename": "n1", "workloads_resource": [RG({3070: 3})]}),
        ("get-nodes-resource-info", {"nodenames": ["n1", "n2"]}),
        ("get-metrics", {"podname": "pod", "nodename": "n1"}),
    ]
    for verb, request in calls:
        plugin.run(verb, request)
    assert plugin.history("n1") == before
    assert state(plugin, "n1") == (EIGHT, G({3070: 1, 3090: 1}))
    assert event_count(plugin, "n2") == 1
