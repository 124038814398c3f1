"""``resource-gpu history NODE [--json]``: the node's event stream, for auditors. Every
state-changing verb appends exactly one event; a request that changes nothing appends none."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from tests.integration.helpers import EIGHT, RFC3339_UTC, RG, event_count, set_usage
from tests.plugin import Plugin, R

CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("add-node", {"nodename": "n1", "resource": R(EIGHT)}),
    (
        "set-node-resource-capacity",
        {"nodename": "n1", "resource_request": RG({3070: 1}), "delta": True, "incr": True},
    ),
    (
        "set-node-resource-usage",
        {
            "nodename": "n1",
            "workloads_resource": [RG({3070: 1}), RG({3090: 2})],
            "delta": True,
            "incr": True,
        },
    ),
    (
        "set-node-resource-info",
        {"nodename": "n1", "capacity": RG({3070: 4, 3090: 4}), "usage": RG({3070: 2})},
    ),
    ("fix-node-resource", {"nodename": "n1", "workloads_resource": [RG({3070: 1})]}),
    ("remove-node", {"nodename": "n1"}),
]


def check_event(event: dict[str, Any], seq: int, verb: str) -> datetime:
    for field in ("seq", "kind", "at", "verb", "op", "change"):
        assert field in event, (field, event)
    assert event["seq"] == seq, event
    assert event["verb"] == verb, event
    assert isinstance(event["kind"], str) and event["kind"], event
    assert isinstance(event["op"], str) and event["op"], event
    assert isinstance(event["change"], dict), event
    assert RFC3339_UTC.match(event["at"]), event["at"]
    at = datetime.fromisoformat(event["at"].replace("Z", "+00:00"))
    assert at.utcoffset() == timezone.utc.utcoffset(None)
    return at


def test_each_change_appends_one_event(plugin: Plugin) -> None:
    for done, (verb, request) in enumerate(CHANGES, 1):
        plugin.ok(verb, request)
        events = plugin.history("n1")
        assert len(events) == done, (verb, events)
        times = [check_event(e, i, CHANGES[i - 1][0]) for i, e in enumerate(events, 1)]
        assert times == sorted(times)
    ops = [e["op"] for e in plugin.history("n1")]
    assert len(set(ops)) == len(ops)  # one operation id per call

    table = plugin.run("history", None, "n1")
    assert table.status == 0 and table.stderr == ""
    for verb, _ in CHANGES:
        assert verb in table.stdout, verb


def test_requests_that_change_nothing_append_nothing(plugin: Plugin) -> None:
    plugin.add("n1", EIGHT)
    set_usage(plugin, "n1", {"nvidia-3070": 1})
    events = event_count(plugin, "n1")
    same_capacity = RG({3070: 4, 3090: 4})
    no_ops: list[tuple[str, dict[str, Any]]] = [
        ("set-node-resource-capacity", {"nodename": "n1", "delta": True, "incr": True}),
        ("set-node-resource-capacity", {"nodename": "n1", "delta": True, "incr": False}),
        (
            "set-node-resource-capacity",
            {"nodename": "n1", "resource_request": same_capacity, "delta": False, "incr": True},
        ),
        ("set-node-resource-usage", {"nodename": "n1", "delta": True, "incr": True}),
        (
            "set-node-resource-usage",
            {"nodename": "n1", "workloads_resource": [], "delta": True, "incr": False},
        ),
        (
            "set-node-resource-usage",
            {"nodename": "n1", "resource": RG({3070: 1}), "delta": False, "incr": True},
        ),
        (
            "set-node-resource-info",
            {"nodename": "n1", "capacity": same_capacity, "usage": RG({3070: 1})},
        ),
        ("fix-node-resource", {"nodename": "n1", "workloads_resource": [RG({3070: 1})]}),
    ]
    for verb, request in no_ops:
        plugin.ok(verb, request)
        assert event_count(plugin, "n1") == events, (verb, request)
    # failures append nothing either
    plugin.fails("add-node", {"nodename": "n1", "resource": R(EIGHT)})
    plugin.fails(
        "set-node-resource-usage",
        {"nodename": "n1", "resource": RG({3070: 2}), "delta": True, "incr": False},
    )
    assert event_count(plugin, "n1") == events
    # removing twice: the second removal finds nothing to remove
    plugin.ok("remove-node", {"nodename": "n1"})
    plugin.ok("remove-node", {"nodename": "n1"})
    events_after = plugin.history("n1")
    assert len(events_after) == events + 1
    assert events_after[-1]["verb"] == "remove-node"
