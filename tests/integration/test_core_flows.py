"""Core's flows (deploy, realloc, release, node edits), each answer fed back as core feeds it;
and node records written by the upstream Go plugin (the same key, the JSON {"capacity": R,
"usage": R})."""

from __future__ import annotations

import pytest

from tests.integration.helpers import EIGHT, RG, G, put_upstream_records, state
from tests.plugin import Plugin, counts

pytestmark = [pytest.mark.grpc, pytest.mark.resident]


def test_node_deploy_realloc_remove_repair_flow(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    plugin.add("n2", G({3070: 2}))

    # Deploy 3 workloads of {3070:1}: capacity -> calculate-deploy -> take the cards.
    request = RG({3070: 1})
    capacity = plugin.ok(
        "get-nodes-deploy-capacity", {"nodenames": ["n1", "n2"], "workload_resource": request}
    )
    assert {n: e["Capacity"] for n, e in capacity["nodes_deploy_capacity_map"].items()} == {
        "n1": 4,
        "n2": 2,
    }
    plan = plugin.ok(
        "calculate-deploy",
        {"nodename": "n1", "deploy_count": 3, "workload_resource_request": request},
    )
    deployed = plan["workloads_resource"]
    taken = plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": deployed, "delta": True, "incr": True},
    )
    assert counts(taken["after"]) == G({3070: 3})

    # One workload fails to start: released with incr=false.
    plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": deployed[2:], "delta": True, "incr": False},
    )
    a, b = deployed[0], deployed[1]

    # Realloc workload a: give its 3070 back, take two 3090.
    realloc = plugin.ok(
        "calculate-realloc",
        {
            "nodename": "n1",
            "workload_resource": a,
            "workload_resource_request": RG({3070: -1, 3090: 2}),
        },
    )
    assert counts(realloc["delta_resource"]) == G({3070: -1, 3090: 2})
    plugin.ok(
        "set-node-resource-usage",
        {
            "nodename": "n1",
            "workloads_resource": [realloc["delta_resource"]],
            "delta": True,
            "incr": True,
        },
    )
    a = realloc["workload_resource"]
    assert state(plugin, "n1") == (EIGHT, G({3070: 1, 3090: 2}))

    # Remove workload b.
    plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": [b], "delta": True, "incr": False},
    )
    # Repair finds the books straight.
    fixed = plugin.ok("fix-node-resource", {"nodename": "n1", "workloads_resource": [a]})
    assert fixed["diffs"] == []
    assert counts(fixed["usage"]) == G({3090: 2})

    # Node set with a partial failure elsewhere: rolled back with the before it got back.
    edit = plugin.ok(
        "set-node-resource-capacity",
        {"nodename": "n1", "resource_request": RG({3070: -2}), "delta": True, "incr": True},
    )
    assert counts(edit["after"]) == G({3070: 2, 3090: 4})
    plugin.ok(
        "set-node-resource-capacity",
        {"nodename": "n1", "resource_request": edit["before"], "delta": False, "incr": True},
    )
    assert state(plugin, "n1") == (EIGHT, G({3090: 2}))

    # Build node choice: n2 has nothing in use.
    assert plugin.ok("get-most-idle-node", {"nodenames": ["n1", "n2"]}) == {
        "nodename": "n2",
        "priority": 100,
    }


def test_upstream_records_are_read_and_written(plugin: Plugin) -> None:
    put_upstream_records(plugin, {"old": (EIGHT, G({3090: 1}) or {})})
    info = plugin.info("old", [RG({3090: 1})])
    assert (counts(info["capacity"]), counts(info["usage"]), info["diffs"]) == (
        EIGHT,
        G({3090: 1}),
        [],
    )
    answer = plugin.ok(
        "set-node-resource-usage",
        {"nodename": "old", "workloads_resource": [RG({3070: 2})], "delta": True, "incr": True},
    )
    assert counts(answer["before"]) == G({3090: 1})
    assert counts(answer["after"]) == G({3070: 2, 3090: 1})
    assert state(plugin, "old") == (EIGHT, G({3070: 2, 3090: 1}))
    events = plugin.history("old")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["verb"] == "set-node-resource-usage"
    plugin.fails("add-node", {"nodename": "old", "resource": RG({3070: 1})})
