"""``verify [NODE ...] [--all] [--repair]``: each head against the fold of its stream.

Heads are corrupted in etcd by hand; the report is one stdout line per disagreeing node
(naming what differs, with both values) and one stderr summary line, exit 1. --repair rewrites
heads from whole streams, as a ``head_repaired`` event; streams with missing events are
reported and left alone.
"""

from __future__ import annotations

import pytest

from tests.audit.helpers import (
    G,
    delete_key,
    error_line,
    head,
    head_doc,
    info_request,
    ok_json,
    ok_many,
    ok_text,
    prod,
    put_head,
    run,
    run_many,
    seqs,
    take,
    usage_error,
)
from tests.etcdkv import Etcd, no_write, upstream_head
from tests.plugin import Plugin, Result

pytestmark = pytest.mark.grpc

AGREE = "every head agrees with its stream"


def report(result: Result, failed: int, of: int) -> dict[str, str]:
    """A verify that found disagreements: its stdout lines by node, after checking the rest."""
    assert result.status == 1, (result.status, result.stdout, result.stderr)
    summary = result.stderr.splitlines()
    assert len(summary) == 1, result.stderr
    assert summary[0].startswith("resource-gpu verify: "), summary
    assert f"{failed} of {of} node" in summary[0], summary
    lines = result.stdout.splitlines()
    by_node: dict[str, str] = {}
    for line in lines:
        assert line.startswith("node "), line
        node = line.split()[1].rstrip(":")
        assert node not in by_node, f"{node} reported twice: {lines}"
        by_node[node] = line
    return by_node


def test_agreeing_heads_pass_and_upstream_records_are_no_disagreement(
    plugin: Plugin, etcd: Etcd
) -> None:
    ok_many(plugin, [info_request("a", {G: 4}, {}), info_request("b", {G: 2}, {})])
    ok_many(plugin, [take("a", {G: 1}), ("remove-node", {"nodename": "b"})])
    etcd.put_upstream_head("u", upstream_head({G: 8}, {G: 3}))  # the Go plugin's record
    with no_write(etcd):
        every, named = run_many(plugin, [["verify", "--all"], ["verify", "u", "a", "b", "a"]])
    assert ok_text(every).splitlines() == [f"3 nodes verified: {AGREE}"]
    assert ok_text(named).splitlines() == [f"3 nodes verified: {AGREE}"]


def test_disagreeing_heads_are_reported_then_repaired(plugin: Plugin, etcd: Etcd) -> None:
    nodes = ["wrong-usage", "wrong-capacity", "stale-seq", "unreadable", "headless", "leftover"]
    ok_many(plugin, [info_request(node, {G: 4}, {G: 1}) for node in nodes])
    ok_many(plugin, [take("stale-seq", {G: 1}), ("remove-node", {"nodename": "leftover"})])
    put_head(etcd, "wrong-usage", head({G: 4}, {G: 3}, 1))
    put_head(etcd, "wrong-capacity", head({G: 8}, {G: 1}, 1))
    put_head(etcd, "stale-seq", head({G: 4}, {G: 2}, 1))
    put_head(etcd, "unreadable", b"{not json")
    delete_key(etcd, etcd.head_key("headless"))
    put_head(etcd, "leftover", head({G: 4}, {}, 2))
    found = {node: kv.value.decode() for node in nodes if (kv := etcd.head(node)) is not None}

    with no_write(etcd):
        lines = report(run(plugin, "verify", "--all"), 6, 6)
    expected = {
        "wrong-usage": ["usage differs", f"head {G}:3", f"stream {G}:1"],
        "wrong-capacity": ["capacity differs", f"head {G}:8", f"stream {G}:4"],
        "stale-seq": ["seq differs: head 1, stream 2"],
        "unreadable": ["head is not readable"],
        "headless": ["no head", f"capacity {G}:4, usage {G}:1"],
        "leftover": ["removed", f"capacity {G}:4"],
    }
    assert sorted(lines) == sorted(expected)
    for node, fragments in expected.items():
        for fragment in fragments:
            assert fragment in lines[node], (fragment, lines[node])
    assert "usage" not in lines["wrong-capacity"] and "capacity" not in lines["wrong-usage"]

    repaired = run(plugin, "verify", "--all", "--repair")
    out = ok_text(repaired).splitlines()
    assert out[-1] == f"6 nodes verified: {AGREE}, 6 repaired"
    assert sorted(line.split()[1].rstrip(":") for line in out[:-1]) == sorted(nodes)
    assert all("-> repaired (event" in line for line in out[:-1]), out

    # the heads are rewritten from the streams, one event further on
    assert head_doc(etcd, "wrong-usage") == head({G: 4}, {G: 1}, 2)
    assert head_doc(etcd, "stale-seq") == head({G: 4}, {G: 2}, 3)
    assert head_doc(etcd, "headless") == head({G: 4}, {G: 1}, 2)
    assert etcd.head("leftover") is None

    again, usage_history, unreadable_history = run_many(
        plugin,
        [
            ["verify", "--all"],
            ["history", "wrong-usage", "--json", "--kind", "head_repaired"],
            ["history", "unreadable", "--json"],
        ],
    )
    assert ok_text(again).splitlines() == [f"6 nodes verified: {AGREE}"]
    (event,) = ok_json(usage_history)
    assert event["seq"] == 2 and event["verb"] == "verify" and event["kind"] == "head_repaired"
    assert event["change"]["found"] == found["wrong-usage"]
    assert event["change"]["state"] == {"capacity": {G: 4}, "usage": {G: 1}}
    events = ok_json(unreadable_history)
    assert seqs(events) == [1, 2]
    assert events[-1]["kind"] == "head_repaired"
    assert events[-1]["change"]["found"] == "{not json"

    # core reads the repaired heads
    info = plugin.info("wrong-usage")
    assert (prod(info["capacity"]), prod(info["usage"])) == ({G: 4}, {G: 1})
    infos = plugin.ok("get-nodes-resource-info", {"nodenames": nodes})["node_resource_info_map"]
    assert sorted(infos) == sorted(nodes)
    assert prod(infos.pop("leftover")["capacity"]) == {}  # removed: an empty node
    got = {node: (prod(info["capacity"]), prod(info["usage"])) for node, info in infos.items()}
    assert got == {
        "wrong-usage": ({G: 4}, {G: 1}),
        "wrong-capacity": ({G: 4}, {G: 1}),
        "stale-seq": ({G: 4}, {G: 2}),
        "unreadable": ({G: 4}, {G: 1}),
        "headless": ({G: 4}, {G: 1}),
    }


def test_streams_with_missing_events_are_reported_and_not_repaired(
    plugin: Plugin, etcd: Etcd
) -> None:
    ok_many(plugin, [info_request("gap", {G: 4}, {}), info_request("cut", {G: 4}, {})])
    ok_many(plugin, [take("gap", {G: 1}), take("cut", {G: 1})])
    plugin.ok(*take("gap", {G: 1}))
    delete_key(etcd, etcd.event_key("gap", 2))  # a hole in the middle
    delete_key(etcd, etcd.event_key("cut", 2))  # the newest event, which the head has seen

    with no_write(etcd):
        checked, repair = run_many(
            plugin, [["verify", "gap", "cut"], ["verify", "gap", "cut", "--repair"]]
        )
    for lines in (report(checked, 2, 2), report(repair, 2, 2)):
        assert sorted(lines) == ["cut", "gap"]
        assert "events 2..2 are missing" in lines["gap"], lines["gap"]
        assert "seq differs: head 2, stream 1" in lines["cut"], lines["cut"]
    repaired = report(repair, 2, 2)
    assert all("not repairable" in line for line in repaired.values()), repaired


def test_names_and_all_together_or_neither_is_an_error(plugin: Plugin) -> None:
    neither, both = run_many(plugin, [["verify"], ["verify", "n1", "--all"]])
    for result in (neither, both):
        assert "--all" in usage_error(result)


def test_a_node_never_known_is_said_so_not_counted_as_disagreeing(
    plugin: Plugin, etcd: Etcd
) -> None:
    """A mistyped name is not a disagreement --repair could fix: verify says there is no such
    node (exit 1), and counts only the nodes it verified."""
    plugin.add("n1", {G: 1})
    plugin.add("n2", {G: 1})
    for repair in ((), ("--repair",)):
        result = run(plugin, "verify", "n1", "nosuch", *repair)
        assert result.stdout == ""
        assert error_line(result, "verify") == (
            "resource-gpu verify: no such node under the prefix (no head, no events): nosuch"
        )
    put_head(etcd, "n2", head({G: 8}, {}, 1))
    result = run(plugin, "verify", "n1", "n2", "nosuch", "other")
    assert (result.status, result.stdout) == (
        1,
        f"node n2: capacity differs: head {G}:8, stream {G}:1\n",
    )
    assert result.stderr.strip() == (
        "resource-gpu verify: 1 of 2 nodes disagrees with its stream or exports (--repair "
        "rewrites heads and publishes exports); no such nodes under the prefix (no head, no "
        "events): nosuch, other"
    )
