"""``nodes [--json]``: every node under the prefix, once, sorted by name, with its state
(live / removed / head missing / upstream / unreadable), capacity, usage, stream length and
last seq.

One node's stream is long enough (1200 events) that listing the keys takes more than one page,
and node names are prefixes of each other, so a skip over a stream that overshoots or stops
short shows up as a missing or doubled node.
"""

from __future__ import annotations

from typing import Any

from tests.audit.helpers import (
    REMOVED,
    A,
    G,
    added,
    cards_cell,
    delete_key,
    event,
    grown,
    head,
    info_request,
    ok_json,
    ok_many,
    ok_text,
    plant,
    run,
    run_many,
    seqs,
    table_rows,
    take,
    used,
)
from tests.etcdkv import Etcd, upstream_head
from tests.plugin import Plugin

LONG = 1200


def row(
    name: str, state: str, capacity: dict[str, int], usage: dict[str, int], events: int, seq: int
) -> dict[str, Any]:
    return {
        "nodename": name,
        "state": state,
        "capacity": {"prod_count_map": capacity},
        "usage": {"prod_count_map": usage},
        "events": events,
        "seq": seq,
    }


def test_every_node_listed_once_sorted_with_its_state(plugin: Plugin, etcd: Etcd) -> None:
    # n1: a long stream, taking and giving back a card in turn (even seqs take)
    long = [event(1, added({G: 4}))]
    long += [event(s, used({G: 1 if s % 2 == 0 else -1})) for s in range(2, LONG + 1)]
    plant(etcd, "n1", long, head({G: 4}, {G: 1}, LONG))
    plant(etcd, "n1-x", [event(1, added({A: 2})), event(2, grown({A: 1}))], head({A: 3}, {}, 2))
    plant(etcd, "n10", [event(1, added({G: 1})), event(2, REMOVED)], None)
    etcd.put_upstream_head("n2", upstream_head({G: 8}, {G: 2}))
    plugin.add("gpu-0", {G: 2})  # one written by the binary, too

    listing, table, verified, tail = run_many(
        plugin,
        [
            ["nodes", "--json"],
            ["nodes"],
            ["verify", "--all"],
            ["history", "n1", "--limit", "2", "--json"],
        ],
    )
    expected = [
        row("gpu-0", "live", {G: 2}, {}, 1, 1),
        row("n1", "live", {G: 4}, {G: 1}, LONG, LONG),
        row("n1-x", "live", {A: 3}, {}, 2, 2),
        row("n10", "removed", {}, {}, 2, 2),
        row("n2", "upstream", {G: 8}, {G: 2}, 0, 0),
    ]
    assert ok_json(listing) == expected

    rows = table_rows(ok_text(table))
    assert rows[0] == ["NODE", "STATE", "CAPACITY", "USAGE", "EVENTS", "SEQ"]
    assert rows[1:] == [
        [
            r["nodename"],
            r["state"],
            cards_cell(r["capacity"]["prod_count_map"]),
            cards_cell(r["usage"]["prod_count_map"]),
            str(r["events"]),
            str(r["seq"]),
        ]
        for r in expected
    ]

    # --all finds the same nodes, and the long stream (read in pages) folds to its head
    assert ok_text(verified).splitlines() == ["5 nodes verified: every head agrees with its stream"]
    assert seqs(ok_json(tail)) == [LONG - 1, LONG]


def test_a_head_deleted_outside_the_plugin_is_not_shown_as_removed(
    plugin: Plugin, etcd: Etcd
) -> None:
    ok_many(plugin, [info_request(n, {G: 4}, {}) for n in ("gone", "headless")])
    ok_many(plugin, [("remove-node", {"nodename": "gone"}), take("headless", {G: 1})])
    assert ok_json(run(plugin, "nodes", "--json"))[0] == row("gone", "removed", {}, {}, 2, 2)

    delete_key(etcd, etcd.head_key("headless"))  # etcdctl del: the stream still says it exists
    etcd.put_many({etcd.event_key("garbled", 1): b"{not json"})  # a headless stream, unreadable
    listing, table = run_many(plugin, [["nodes", "--json"], ["nodes"]])
    assert ok_json(listing) == [
        row("garbled", "unreadable", {}, {}, 1, 1),
        row("gone", "removed", {}, {}, 2, 2),
        row("headless", "head missing", {}, {}, 2, 2),
    ]
    assert table_rows(ok_text(table))[1:] == [
        ["garbled", "unreadable", "none", "none", "1", "1"],
        ["gone", "removed", "none", "none", "2", "2"],
        ["headless", "head missing", "none", "none", "2", "2"],
    ]
