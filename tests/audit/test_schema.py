"""Schema versions and adoption.

Events the previous release stored (v1: no ``by``) are read, folded, verified and continued
as they are; events from a newer release are refused with a message saying to upgrade. A head
the upstream Go plugin wrote is adopted on the first write as its own ``adopted`` event.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.audit.helpers import (
    Doc,
    G,
    added,
    error_line,
    event,
    head,
    head_doc,
    ok_json,
    ok_text,
    parse_time,
    plant,
    prod,
    run,
    run_many,
    seqs,
    take,
)
from tests.etcdkv import Etcd, upstream_head
from tests.plugin import Plugin

V1_EVENT = (
    b'{"seq":1,"at":"2026-11-01T10:00:00.000001Z","verb":"add-node","op":"abc",'
    b'"change":{"kind":"node_added","capacity":{"nvidia-3090":4}},"v":1}'
)
V1_HEAD = b'{"capacity":{"prod_count_map":{"nvidia-3090":4}},"usage":{"prod_count_map":{}},"seq":1}'
BY = re.compile(r"^[^@\s]+@\S+$")


@pytest.fixture
def v1(plugin: Plugin, etcd: Etcd) -> Plugin:
    """Node ``old`` as the previous release left it."""
    etcd.put_many({etcd.event_key("old", 1): V1_EVENT, etcd.head_key("old"): V1_HEAD})
    return plugin


def test_v1_events_are_read_and_continued(v1: Plugin, etcd: Etcd) -> None:
    history, shown, verified = run_many(
        v1, [["history", "old", "--json"], ["show", "old", "--json"], ["verify", "old"]]
    )
    (old,) = ok_json(history)
    assert old["v"] == 1 and old.get("by") is None and old["op"] == "abc"
    assert old["kind"] == "node_added" and old["change"] == {
        "kind": "node_added",
        "capacity": {G: 4},
    }
    assert parse_time(old["at"]) == parse_time("2026-11-01T10:00:00.000001Z")
    assert ok_json(shown) == {
        "capacity": {"prod_count_map": {G: 4}},
        "usage": {"prod_count_map": {}},
        "seq": 1,
    }
    assert ok_text(verified).startswith("1 node verified")

    answer = v1.ok(*take("old", {G: 1}))
    assert prod(answer["after"]) == {G: 1}
    history, verified, table = run_many(
        v1, [["history", "old", "--json"], ["verify", "--all"], ["history", "old"]]
    )
    events = ok_json(history)
    assert seqs(events) == [1, 2]
    assert [e["v"] for e in events] == [1, 3]
    assert BY.match(events[1]["by"]), events[1]["by"]
    assert ok_text(verified).startswith("1 node verified")
    assert "node_added" in ok_text(table)
    assert etcd.events("old")[0].value == V1_EVENT, "the v1 event was rewritten"
    assert head_doc(etcd, "old") == head({G: 4}, {G: 1}, 2)


def test_export_keeps_v1_events_as_stored(v1: Plugin) -> None:
    """``export``: "one event per line exactly as stored" -- a v1 event has no ``by``."""
    (line,) = ok_text(run(v1, "export", "old")).splitlines()
    assert json.loads(line) == json.loads(V1_EVENT)


NEWER: dict[str, Doc] = {
    "known kind": {"kind": "usage_changed", "delta": {G: 1}, "workloads": None},
    "unknown kind": {"kind": "gpu_melted", "celsius": 900},
}


@pytest.mark.parametrize("change", NEWER.values(), ids=list(NEWER))
def test_events_of_a_newer_schema_say_to_upgrade(plugin: Plugin, etcd: Etcd, change: Doc) -> None:
    plant(etcd, "n1", [event(1, added({G: 4})), event(2, change, v=99)], head({G: 4}, {}, 2))
    for command, result in zip(
        ["history", "show"],
        run_many(plugin, [["history", "n1"], ["show", "n1", "--json"]]),
        strict=True,
    ):
        line = error_line(result, command)
        assert "upgrade" in line and "99" in line, line


def test_an_upstream_record_is_adopted_as_its_own_event(plugin: Plugin, etcd: Etcd) -> None:
    etcd.put_upstream_head("up", upstream_head({G: 2}, {G: 1}))
    before, listed = run_many(plugin, [["history", "up", "--json"], ["nodes", "--json"]])
    assert ok_json(before) == []  # no events until the first write adopts it
    assert [(n["state"], n["events"]) for n in ok_json(listed)] == [("upstream", 0)]

    plugin.ok(*take("up", {G: 1}))
    history, listed, verified, at1 = run_many(
        plugin,
        [
            ["history", "up", "--json"],
            ["nodes", "--json"],
            ["verify", "up"],
            ["show", "up", "--at", "1", "--json"],
        ],
    )
    adopted, deployed = ok_json(history)
    assert (adopted["seq"], adopted["kind"]) == (1, "adopted")
    record = json.dumps(upstream_head({G: 2}, {G: 1}))  # as put_upstream_head stored it
    assert adopted["change"] == {
        "kind": "adopted",
        "capacity": {G: 2},
        "usage": {G: 1},
        "record": record,
    }  # the record kept exactly as found
    assert (deployed["seq"], deployed["kind"]) == (2, "usage_changed")
    assert deployed["change"]["delta"] == {G: 1}
    assert adopted["verb"] == deployed["verb"] == "set-node-resource-usage"
    assert adopted["op"] == deployed["op"], "one call, one operation id"
    assert adopted["v"] == deployed["v"] == 3
    (node,) = ok_json(listed)
    assert (node["state"], node["events"], node["seq"]) == ("live", 2, 2)
    assert prod(node["usage"]) == {G: 2}
    assert ok_text(verified).startswith("1 node verified")
    assert ok_json(at1) == {
        "capacity": {"prod_count_map": {G: 2}},
        "usage": {"prod_count_map": {G: 1}},
        "seq": 1,
    }
