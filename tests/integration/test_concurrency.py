"""Concurrent calls on one node (contract §1: core does not lock add-node, etcd locks are not
mutual exclusion; the plugin must be correct on its own)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.integration.helpers import event_count, state
from tests.plugin import Plugin, R, Result, counts

PARALLEL = 6


def in_parallel(plugin: Plugin, calls: list[tuple[str, Any]]) -> list[Result]:
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: plugin.run(*call), calls))


def test_parallel_usage_increments_all_land(plugin: Plugin) -> None:
    plugin.add("n1", {"nvidia-3070": PARALLEL})
    request = {
        "nodename": "n1",
        "workloads_resource": [R({"nvidia-3070": 1})],
        "delta": True,
        "incr": True,
    }
    results = in_parallel(plugin, [("set-node-resource-usage", request)] * PARALLEL)
    assert [(r.status, r.stderr) for r in results] == [(0, "")] * PARALLEL
    befores = sorted(counts(r.answer["before"]).get("nvidia-3070", 0) for r in results)
    assert befores == list(range(PARALLEL))  # each call saw the one before it
    assert state(plugin, "n1") == ({"nvidia-3070": PARALLEL}, {"nvidia-3070": PARALLEL})
    assert event_count(plugin, "n1") == 1 + PARALLEL


def test_parallel_add_node_only_one_wins(plugin: Plugin) -> None:
    calls = [
        ("add-node", {"nodename": "n1", "resource": R({f"gpu-{i}": i + 1})})
        for i in range(PARALLEL)
    ]
    results = in_parallel(plugin, calls)
    winners = [i for i, r in enumerate(results) if r.status == 0]
    assert len(winners) == 1, [(r.status, r.stderr) for r in results]
    for i, result in enumerate(results):
        if i != winners[0]:
            assert result.stdout == ""
            assert result.stderr.strip().startswith("resource-gpu add-node: node n1: ")
            assert "node already exists" in result.stderr
    (winner,) = winners
    assert state(plugin, "n1") == ({f"gpu-{winner}": winner + 1}, {})
    assert event_count(plugin, "n1") == 1
