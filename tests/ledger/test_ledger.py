"""The ledger as stored in etcd, checked key by key through the real binary.

Each state-changing call is one transaction that appends exactly one event (two when it adopts an
upstream record) and moves the head in the same revision; reads, no-ops and failures write
nothing.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.etcdkv import KV, Etcd, no_write, upstream_head
from tests.plugin import Plugin, R, counts

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
G = "nvidia-3090"
A = "nvidia-a100"


def check_envelope(event: dict[str, Any], seq: int, verb: str, kind: str) -> None:
    assert event["seq"] == seq
    assert event["verb"] == verb
    assert event["v"] == 3
    assert isinstance(event["by"], str) and "@" in event["by"], event["by"]
    assert event["change"]["kind"] == kind
    assert isinstance(event["op"], str) and event["op"]
    assert isinstance(event["at"], str) and RFC3339_UTC.match(event["at"]), event["at"]
    at = datetime.fromisoformat(event["at"].replace("Z", "+00:00"))
    assert at.utcoffset() == timezone.utc.utcoffset(None)
    assert abs((datetime.now(timezone.utc) - at).total_seconds()) < 3600


def check_head(head: KV | None, capacity: dict[str, int], usage: dict[str, int], seq: int) -> None:
    """The head keeps the upstream record shape, plus the stream's position: ``seq``, and the
    digest and time of its last event (``tip``, ``at``)."""
    assert head is not None
    doc = head.json()
    assert list(doc) == ["capacity", "usage", "seq", "tip", "at"], doc
    assert set(doc["capacity"]) == {"prod_count_map"}
    assert set(doc["usage"]) == {"prod_count_map"}
    assert counts(doc["capacity"]) == capacity
    assert counts(doc["usage"]) == usage
    assert doc["seq"] == seq


def write(
    plugin: Plugin,
    etcd: Etcd,
    node: str,
    verb: str,
    request: dict[str, Any],
    *,
    kinds: list[str],
) -> tuple[Any, list[dict[str, Any]]]:
    """Run a write verb; check it was one transaction that appended exactly ``kinds``."""
    old_events = etcd.events(node)
    old_revision = etcd.revision()
    answer = plugin.ok(verb, request)
    revision = etcd.revision()
    events = etcd.events(node)
    assert revision == old_revision + 1, "the call was not exactly one etcd transaction"
    assert events[: len(old_events)] == old_events, "earlier events were touched"
    new = events[len(old_events) :]
    assert len(new) == len(kinds)
    last_seq = old_events[-1].json()["seq"] if old_events else 0
    docs = [kv.json() for kv in new]
    for i, (kv, doc, kind) in enumerate(zip(new, docs, kinds, strict=True), start=1):
        assert kv.key == etcd.event_key(node, last_seq + i)
        check_envelope(doc, last_seq + i, verb, kind)
        assert kv.create_revision == kv.mod_revision == revision
    assert len({doc["op"] for doc in docs}) == 1, "the events of one call carry one op"
    head = etcd.head(node)
    if kinds[-1] == "node_removed":
        assert head is None
    else:
        assert head is not None
        assert head.mod_revision == revision
        assert head.json()["seq"] == last_seq + len(kinds)
    return answer, docs


def test_each_write_appends_one_event_and_moves_the_head(plugin: Plugin, etcd: Etcd) -> None:
    n = "n1"
    ops: list[str] = []

    def step(verb: str, request: dict[str, Any], kind: str) -> Any:
        answer, docs = write(plugin, etcd, n, verb, {"nodename": n, **request}, kinds=[kind])
        ops.append(docs[0]["op"])
        return answer

    answer = step("add-node", {"resource": R({G: 4})}, "node_added")
    assert counts(answer["capacity"]) == {G: 4}
    check_head(etcd.head(n), {G: 4}, {}, 1)

    answer = step(
        "set-node-resource-capacity",
        {"resource_request": R({G: 2, A: 1}), "delta": True, "incr": True},
        "capacity_changed",
    )
    assert counts(answer["before"]) == {G: 4}
    assert counts(answer["after"]) == {G: 6, A: 1}
    check_head(etcd.head(n), {G: 6, A: 1}, {}, 2)

    answer = step(
        "set-node-resource-capacity",
        {"resource_request": R({G: -1}), "delta": True, "incr": True},
        "capacity_changed",
    )
    assert counts(answer["after"]) == {G: 5, A: 1}
    check_head(etcd.head(n), {G: 5, A: 1}, {}, 3)

    step(
        "set-node-resource-capacity",
        {"resource": R({G: 4, A: 1}), "delta": False, "incr": True},
        "capacity_set",
    )
    check_head(etcd.head(n), {G: 4, A: 1}, {}, 4)

    deploy = {"workloads_resource": [R({G: 1}), R({G: 1, A: 1})], "delta": True, "incr": True}
    answer = step("set-node-resource-usage", deploy, "usage_changed")
    assert counts(answer["before"]) == {}
    assert counts(answer["after"]) == {G: 2, A: 1}
    check_head(etcd.head(n), {G: 4, A: 1}, {G: 2, A: 1}, 5)

    realloc = {"workloads_resource": [R({G: 1, A: -1})], "delta": True, "incr": True}
    answer = step("set-node-resource-usage", realloc, "usage_changed")
    assert counts(answer["after"]) == {G: 3}
    check_head(etcd.head(n), {G: 4, A: 1}, {G: 3}, 6)

    release = {"workloads_resource": [R({G: 1})], "delta": True, "incr": False}
    answer = step("set-node-resource-usage", release, "usage_changed")
    assert counts(answer["after"]) == {G: 2}
    check_head(etcd.head(n), {G: 4, A: 1}, {G: 2}, 7)

    rollback = {"resource": R({G: 1}), "delta": False}
    answer = step("set-node-resource-usage", rollback, "usage_set")
    assert (counts(answer["before"]), counts(answer["after"])) == ({G: 2}, {G: 1})
    check_head(etcd.head(n), {G: 4, A: 1}, {G: 1}, 8)

    answer = step("fix-node-resource", {"workloads_resource": [R({G: 2}), None]}, "usage_rebuilt")
    assert counts(answer["usage"]) == {G: 2}
    assert answer["diffs"]
    check_head(etcd.head(n), {G: 4, A: 1}, {G: 2}, 9)

    step("set-node-resource-info", {"capacity": R({G: 8}), "usage": R({G: 3})}, "node_info_set")
    check_head(etcd.head(n), {G: 8}, {G: 3}, 10)

    assert step("remove-node", {}, "node_removed") == {}
    assert etcd.head(n) is None

    # set-node-resource-info creates a missing node: the stream continues.
    step("set-node-resource-info", {"capacity": R({G: 1}), "usage": R(None)}, "node_info_set")
    check_head(etcd.head(n), {G: 1}, {}, 12)

    assert len(set(ops)) == len(ops), "every call has its own op"
    seqs = [doc["seq"] for doc in etcd.event_docs(n)]
    assert seqs == list(range(1, 13))
    assert [e["seq"] for e in plugin.history(n)] == seqs


def test_reads_never_write(plugin: Plugin, etcd: Etcd) -> None:
    plugin.add("n1", {G: 4, A: 2})
    plugin.add("n2", {G: 1})
    plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": [R({G: 1})], "delta": True, "incr": True},
    )
    reads: list[tuple[str, Any]] = [
        (
            "calculate-deploy",
            {"nodename": "n1", "deploy_count": 2, "workload_resource_request": R({G: 1})},
        ),
        (
            "calculate-deploy",
            {"nodename": "n1", "deploy_count": 3, "workload_resource_request": None},
        ),
        (
            "calculate-realloc",
            {
                "nodename": "n1",
                "workload_resource": R({G: 1}),
                "workload_resource_request": R({G: 1, A: 1}),
            },
        ),
        ("calculate-remap", {"nodename": "n1"}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n1", "n2"], "workload_resource": R({G: 1})}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n1", "n2"], "workload_resource": None}),
        ("get-node-resource-info", {"nodename": "n1", "workloads_resource": [R({G: 2})]}),
        ("get-node-resource-info", {"nodename": "missing"}),
        ("get-nodes-resource-info", {"nodenames": ["n1", "n2", "missing"]}),
        ("get-most-idle-node", {"nodenames": ["n1", "n2"]}),
        ("get-metrics", {"podname": "p", "nodename": "n1"}),
        (
            "get-metrics",
            {"nodes": [{"podname": "p", "nodename": "n1"}, {"podname": "p", "nodename": "n2"}]},
        ),
        ("get-metrics-description", {}),
        ("name", {}),
        ("verbs", {}),
    ]
    for verb, request in reads:
        with no_write(etcd):
            plugin.ok(verb, request)
    with no_write(etcd):
        assert len(plugin.history("n1")) == 2


def test_a_request_that_changes_nothing_appends_nothing(plugin: Plugin, etcd: Etcd) -> None:
    plugin.add("n1", {G: 4})
    plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": [R({G: 1})], "delta": True, "incr": True},
    )
    same: list[tuple[str, dict[str, Any]]] = [
        ("set-node-resource-capacity", {"resource": R({G: 4}), "delta": False, "incr": True}),
        ("set-node-resource-capacity", {"resource_request": R({G: 4}), "delta": False}),
        ("set-node-resource-capacity", {"resource": R({}), "delta": True, "incr": True}),
        ("set-node-resource-capacity", {"resource": None, "delta": True, "incr": True}),
        ("set-node-resource-usage", {"workloads_resource": [], "delta": True, "incr": True}),
        # a workload without GPU cards, as core sends for every non-GPU deploy and release
        (
            "set-node-resource-usage",
            {"workloads_resource": [R(None), R({})], "delta": True, "incr": True},
        ),
        ("set-node-resource-usage", {"workloads_resource": [R({})], "delta": True, "incr": False}),
        ("set-node-resource-usage", {"resource": R({G: 1}), "delta": False}),
        ("set-node-resource-info", {"capacity": R({G: 4}), "usage": R({G: 1})}),
        ("fix-node-resource", {"workloads_resource": [R({G: 1}), None, R({})]}),
    ]
    for verb, request in same:
        with no_write(etcd):
            answer = plugin.ok(verb, {"nodename": "n1", **request})
        if "before" in answer:
            assert counts(answer["before"]) == counts(answer["after"]), (verb, request)
        if verb == "fix-node-resource":
            assert answer["diffs"] == []
    with no_write(etcd):
        assert plugin.ok("remove-node", {"nodename": "never-added"}) == {}
    assert len(etcd.events("n1")) == 2
    assert etcd.events("never-added") == []


FAILURES: list[tuple[str, dict[str, Any]]] = [
    ("add-node", {"nodename": "n1", "resource": R({G: 1})}),  # already exists
    ("add-node", {"nodename": "n9", "resource": R({G: -1})}),
    (
        "set-node-resource-capacity",
        {"nodename": "n1", "resource_request": R({G: -5}), "delta": True, "incr": True},
    ),
    (
        "set-node-resource-capacity",
        {"nodename": "n1", "resource": R({G: 4}), "delta": True, "incr": False},
    ),
    ("set-node-resource-capacity", {"nodename": "n1", "resource": R({G: -1}), "delta": False}),
    (
        "set-node-resource-capacity",
        {"nodename": "n9", "resource": R({G: 1}), "delta": True, "incr": False},
    ),
    (
        "set-node-resource-usage",
        {
            "nodename": "n1",
            "workloads_resource": [R({G: 1}), R({G: 5})],
            "delta": True,
            "incr": False,
        },
    ),
    (
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": [R({A: 1})], "delta": True, "incr": False},
    ),
    (
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": [R({G: -3})], "delta": True, "incr": True},
    ),
    ("set-node-resource-usage", {"nodename": "n1", "resource": R({G: -1}), "delta": False}),
    (
        "set-node-resource-usage",
        {"nodename": "n9", "workloads_resource": [R({G: 1})], "delta": True, "incr": True},
    ),
    ("set-node-resource-info", {"nodename": "n1", "capacity": R({G: -1}), "usage": R(None)}),
    ("fix-node-resource", {"nodename": "n9", "workloads_resource": []}),
    ("fix-node-resource", {"nodename": "n1", "workloads_resource": [R({G: -1})]}),
    (
        "calculate-deploy",
        {"nodename": "n1", "deploy_count": 3, "workload_resource_request": R({G: 1})},
    ),
    (
        "calculate-deploy",
        {"nodename": "n9", "deploy_count": 1, "workload_resource_request": R({G: 1})},
    ),
    (
        "calculate-realloc",
        {"nodename": "n1", "workload_resource": R({G: 1}), "workload_resource_request": R({G: 3})},
    ),
]


def test_a_failed_request_writes_nothing(plugin: Plugin, etcd: Etcd) -> None:
    plugin.add("n1", {G: 3})
    plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": [R({G: 2})], "delta": True, "incr": True},
    )
    for verb, request in FAILURES:
        with no_write(etcd):
            line = plugin.fails(verb, request)
        node = request.get("nodename") or "n9"
        assert f"node {node}: " in line, line
        assert line.count(f"node {node}:") == 1, line
        assert "internal error" not in line, line
    check_head(etcd.head("n1"), {G: 3}, {G: 2}, 2)
    assert etcd.head("n9") is None
    assert etcd.events("n9") == []
    assert "already exists" in plugin.fails("add-node", {"nodename": "n1", "resource": R({G: 1})})


def test_remove_keeps_the_stream_and_a_readded_node_continues_it(
    plugin: Plugin, etcd: Etcd
) -> None:
    n = "n1"
    write(plugin, etcd, n, "add-node", {"nodename": n, "resource": R({G: 2})}, kinds=["node_added"])
    deploy = {"nodename": n, "workloads_resource": [R({G: 1})], "delta": True, "incr": True}
    write(plugin, etcd, n, "set-node-resource-usage", deploy, kinds=["usage_changed"])
    write(plugin, etcd, n, "remove-node", {"nodename": n}, kinds=["node_removed"])

    assert etcd.head(n) is None
    assert [kv.key for kv in etcd.events(n)] == [etcd.event_key(n, s) for s in (1, 2, 3)]
    with no_write(etcd):
        assert plugin.info(n) is None
        empty = {"capacity": R({}), "usage": R({})}  # a removed node reads as an empty one
        assert plugin.ok("get-nodes-resource-info", {"nodenames": [n]}) == {
            "node_resource_info_map": {n: empty}
        }
        assert plugin.ok("remove-node", {"nodename": n}) == {}
        assert "exceed its capacity" in plugin.fails("set-node-resource-usage", deploy)
    assert [e["kind"] for e in plugin.history(n)] == ["node_added", "usage_changed", "node_removed"]

    write(plugin, etcd, n, "add-node", {"nodename": n, "resource": R({G: 4})}, kinds=["node_added"])
    check_head(etcd.head(n), {G: 4}, {}, 4)
    info = plugin.info(n)
    assert (counts(info["capacity"]), counts(info["usage"])) == ({G: 4}, {})
    history = plugin.history(n)
    assert [e["seq"] for e in history] == [1, 2, 3, 4]
    assert [e["kind"] for e in history] == [
        "node_added",
        "usage_changed",
        "node_removed",
        "node_added",
    ]
    assert len({e["op"] for e in history}) == 4


UPSTREAM = upstream_head({G: 2}, None)

FIRST_WRITES: list[tuple[str, dict[str, Any], str, dict[str, int] | None, dict[str, int]]] = [
    (
        "set-node-resource-usage",
        {"workloads_resource": [R({G: 1})], "delta": True, "incr": True},
        "usage_changed",
        {G: 2},
        {G: 1},
    ),
    (
        "set-node-resource-capacity",
        {"resource_request": R({G: 1}), "delta": True, "incr": True},
        "capacity_changed",
        {G: 3},
        {},
    ),
    ("fix-node-resource", {"workloads_resource": [R({G: 2})]}, "usage_rebuilt", {G: 2}, {G: 2}),
    ("remove-node", {}, "node_removed", None, {}),
]


@pytest.mark.parametrize(
    ("verb", "request_", "kind", "capacity", "usage"),
    FIRST_WRITES,
    ids=[w[0] for w in FIRST_WRITES],
)
def test_upstream_record_is_adopted_on_first_write(
    plugin: Plugin,
    etcd: Etcd,
    verb: str,
    request_: dict[str, Any],
    kind: str,
    capacity: dict[str, int] | None,
    usage: dict[str, int],
) -> None:
    n = "legacy"
    etcd.put_upstream_head(n, UPSTREAM)

    with no_write(etcd):
        info = plugin.info(n, [R({G: 1})])
        assert counts(info["capacity"]) == {G: 2}
        assert counts(info["usage"]) == {}
        assert info["diffs"]
        listed = plugin.ok("get-nodes-resource-info", {"nodenames": [n]})
        assert counts(listed["node_resource_info_map"][n]["capacity"]) == {G: 2}
        assert plugin.history(n) == []
        # a write that changes nothing, and a failed one, adopt nothing
        plugin.ok("set-node-resource-capacity", {"nodename": n, "resource": R({G: 2})})
        plugin.fails("add-node", {"nodename": n, "resource": R({G: 1})})
        plugin.fails(
            "set-node-resource-usage",
            {"nodename": n, "workloads_resource": [R({G: 1})], "delta": True, "incr": False},
        )
    untouched = etcd.head(n)
    assert untouched is not None
    assert untouched.json() == UPSTREAM

    _, docs = write(plugin, etcd, n, verb, {"nodename": n, **request_}, kinds=["adopted", kind])
    adopted = docs[0]["change"]
    assert adopted["capacity"] == {G: 2}
    assert not adopted.get("usage")
    if capacity is None:
        assert etcd.head(n) is None
    else:
        check_head(etcd.head(n), capacity, usage, 2)
        info = plugin.info(n)
        assert (counts(info["capacity"]), counts(info["usage"])) == (capacity, usage)

    history = plugin.history(n)
    assert [(e["seq"], e["kind"]) for e in history] == [(1, "adopted"), (2, kind)]
    assert history[0]["op"] == history[1]["op"]

    if capacity is not None:
        # adopted once: the next write is a plain single event
        more = {"nodename": n, "resource_request": R({A: 1}), "delta": True, "incr": True}
        _, later = write(
            plugin, etcd, n, "set-node-resource-capacity", more, kinds=["capacity_changed"]
        )
        assert later[0]["op"] != docs[0]["op"]
        assert [e["seq"] for e in plugin.history(n)] == [1, 2, 3]


def test_upstream_record_with_usage_is_adopted_as_found(plugin: Plugin, etcd: Etcd) -> None:
    n = "legacy"
    etcd.put_upstream_head(n, upstream_head({G: 4, A: 1}, {G: 3}))
    with no_write(etcd):
        info = plugin.info(n)
        assert (counts(info["capacity"]), counts(info["usage"])) == ({G: 4, A: 1}, {G: 3})
    release = {"nodename": n, "workloads_resource": [R({G: 2})], "delta": True, "incr": False}
    answer, docs = write(
        plugin, etcd, n, "set-node-resource-usage", release, kinds=["adopted", "usage_changed"]
    )
    assert (counts(answer["before"]), counts(answer["after"])) == ({G: 3}, {G: 1})
    assert docs[0]["change"]["capacity"] == {G: 4, A: 1}
    assert docs[0]["change"]["usage"] == {G: 3}
    check_head(etcd.head(n), {G: 4, A: 1}, {G: 1}, 2)


UPSTREAM_VARIANTS: dict[str, tuple[dict[str, Any], dict[str, int], dict[str, int]]] = {
    "usage-map-null": (upstream_head({G: 2}, None), {G: 2}, {}),
    "usage-map-empty": (upstream_head({G: 2}, {}), {G: 2}, {}),
    "usage-null": ({"capacity": {"prod_count_map": {G: 2}}, "usage": None}, {G: 2}, {}),
    "usage-missing": ({"capacity": {"prod_count_map": {G: 2}}}, {G: 2}, {}),
    "unknown-keys": ({**upstream_head({G: 2}, {G: 1}), "note": "x"}, {G: 2}, {G: 1}),
}


@pytest.mark.parametrize("variant", list(UPSTREAM_VARIANTS))
def test_upstream_record_variants_are_read_and_adopted(
    plugin: Plugin, etcd: Etcd, variant: str
) -> None:
    """Upstream's NodeResourceInfo has pointer fields, so it can store ``"usage": null``;
    null means empty and unknown keys are ignored (contract section 1, decoding)."""
    record, capacity, usage = UPSTREAM_VARIANTS[variant]
    n = "legacy"
    etcd.put_upstream_head(n, record)
    with no_write(etcd):
        info = plugin.info(n)
        assert (counts(info["capacity"]), counts(info["usage"])) == (capacity, usage)
    deploy = {"nodename": n, "workloads_resource": [R({G: 1})], "delta": True, "incr": True}
    write(plugin, etcd, n, "set-node-resource-usage", deploy, kinds=["adopted", "usage_changed"])
    check_head(etcd.head(n), capacity, {G: usage.get(G, 0) + 1}, 2)


def test_unreadable_head_fails_with_one_line_naming_the_node_once(
    plugin: Plugin, etcd: Etcd
) -> None:
    etcd.put_many({etcd.head_key("broken"): b"{not json"})
    deploy = {"nodename": "broken", "workloads_resource": [R({G: 1})], "delta": True}
    for verb, request in [
        ("get-node-resource-info", {"nodename": "broken"}),
        ("set-node-resource-usage", {**deploy, "incr": True}),
    ]:
        with no_write(etcd):
            line = plugin.fails(verb, request)
        assert line.startswith(f"resource-gpu {verb}: node broken: "), line
        assert line.count("node broken:") == 1, line
        assert "internal error" not in line, line
