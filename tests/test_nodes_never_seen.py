"""A node the plugin has no record of (added to core before the plugin was installed) is an
empty node, as resource-extend says (its docs/protocol.md, "Error handling"): every core verb
answers for it what it answers for a node added with nothing, but get-node-resource-info
(``null``) and fix-node-resource (nothing to fix), and a capacity or usage edit creates its
record, in one event, with compare-and-swap on the absent record.

Each verb runs through the process, as core runs it, once for a node never seen and once for a
node added empty; the answers (stdout, stderr, exit status) must be the same but for the name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store import Store
from resource_extend.ledger.store.outcomes import Appended
from resource_extend.projections.gpu import decide
from resource_extend.projections.gpu.node import GPU
from tests.plugin import Plugin, R, counts

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

GHOST = "ghost"
EMPTY = "plain"
P = "nvidia-3070"
CARDS = {"prod_count_map": {P: 1}}

Request = dict[str, Any]
Decide = Callable[[Any], Any]

GPU_QUERIES: list[tuple[str, Request]] = [
    ("get-nodes-deploy-capacity", {"nodenames": [EMPTY], "workload_resource": None}),
    ("get-nodes-deploy-capacity", {"nodenames": [EMPTY], "workload_resource": CARDS}),
    ("get-nodes-resource-info", {"nodenames": [EMPTY]}),
    ("get-most-idle-node", {"nodenames": [EMPTY]}),
    ("calculate-deploy", {"nodename": EMPTY, "deploy_count": 2, "workload_resource_request": None}),
    ("calculate-deploy", {"nodename": EMPTY, "deploy_count": 1,
                          "workload_resource_request": CARDS}),
    ("calculate-realloc", {"nodename": EMPTY, "workload_resource": None,
                           "workload_resource_request": None}),
    ("calculate-realloc", {"nodename": EMPTY, "workload_resource": None,
                           "workload_resource_request": CARDS}),
    ("get-metrics", {"podname": "p", "nodename": EMPTY}),
    ("get-metrics", {"nodes": [{"podname": "p", "nodename": EMPTY}]}),
    ("remove-node", {"nodename": EMPTY}),
]  # fmt: skip
"""Each query verb, asking nothing of the plugin and asking a card; remove-node last (its
answer is ``{}`` either way)."""

STORAGE_QUERIES: list[tuple[str, Request]] = [
    ("get-nodes-deploy-capacity", {"nodenames": [EMPTY], "workload_resource": None}),
    ("get-nodes-deploy-capacity", {"nodenames": [EMPTY], "workload_resource": {}}),
    ("get-nodes-deploy-capacity", {"nodenames": [EMPTY],
                                   "workload_resource": {"volumes": ["AUTO:/data:rw:1G"]}}),
    ("get-nodes-deploy-capacity", {"nodenames": [EMPTY], "workload_resource": {"storage": "1G"}}),
    ("get-nodes-resource-info", {"nodenames": [EMPTY]}),
    ("get-most-idle-node", {"nodenames": [EMPTY]}),
    ("calculate-deploy", {"nodename": EMPTY, "deploy_count": 2, "workload_resource_request": {}}),
    ("calculate-deploy", {"nodename": EMPTY, "deploy_count": 1,
                          "workload_resource_request": {"volumes": ["AUTO:/data:rw:1G"]}}),
    ("calculate-deploy", {"nodename": EMPTY, "deploy_count": 1,
                          "workload_resource_request": {"storage": "1G"}}),
    ("calculate-realloc", {"nodename": EMPTY, "workload_resource": None,
                           "workload_resource_request": {}}),
    ("calculate-realloc", {"nodename": EMPTY, "workload_resource": None,
                           "workload_resource_request": {"volumes": ["AUTO:/data:rw:1G"]}}),
    ("get-metrics", {"podname": "p", "nodename": EMPTY}),
    ("get-metrics", {"nodes": [{"podname": "p", "nodename": EMPTY}]}),
    ("remove-node", {"nodename": EMPTY}),
]  # fmt: skip


@pytest.fixture(params=["resource-gpu", "resource-storage"])
def installed(request: pytest.FixtureRequest, plugin: Plugin, storage: Plugin) -> Plugin:
    return plugin if request.param == "resource-gpu" else storage


def renamed(value: Any, old: str, new: str) -> Any:
    """``value`` with every ``old`` node name in it (keys, values, statsd keys) made ``new``."""
    return json.loads(json.dumps(value).replace(old, new))


def add_empty(plugin: Plugin, node: str) -> None:
    """A node added with nothing of the plugin's (and no engine report)."""
    resource: Request | None = None if plugin.program == "resource-gpu" else {}
    plugin.ok("add-node", {"nodename": node, "resource": resource})


def never_written(plugin: Plugin, node: str) -> None:
    """``node`` has no record and no event: nothing was written for it."""
    assert plugin.info(node) is None
    history = plugin.run("history", None, node, "--json")
    assert history.status != 0 and "never known" in history.stderr, history


def same_for_both(plugin: Plugin, verb: str, request: Request) -> None:
    """``verb`` answers for a node never seen what it answers for an empty node."""
    empty = plugin.run(verb, request)
    ghost = plugin.run(verb, renamed(request, EMPTY, GHOST))
    assert ghost.status == empty.status, (verb, request, ghost, empty)
    assert ghost.stderr == empty.stderr.replace(EMPTY, GHOST), (verb, request)
    assert ghost.stdout == empty.stdout.replace(EMPTY, GHOST), (verb, request)


def test_every_verb_answers_for_a_node_never_seen_as_for_an_empty_node(installed: Plugin) -> None:
    add_empty(installed, EMPTY)
    queries = GPU_QUERIES if installed.program == "resource-gpu" else STORAGE_QUERIES
    answered = {verb for verb, _ in queries}
    for verb, request in queries:
        same_for_both(installed, verb, request)
    assert answered >= {"get-nodes-deploy-capacity", "calculate-deploy", "calculate-realloc"}
    # What asks nothing of the plugin is answered for a node never seen, as core needs.
    asked = {"nodename": GHOST, "deploy_count": 2, "workload_resource_request": None}
    assert len(installed.ok("calculate-deploy", asked)["workloads_resource"]) == 2
    asked = {"nodenames": [GHOST], "workload_resource": None}
    assert installed.ok("get-nodes-deploy-capacity", asked)["total"] > 0
    never_written(installed, GHOST)


@pytest.mark.parametrize("delta", [True, False], ids=["delta", "absolute"])
def test_a_capacity_edit_creates_the_record_in_one_event(installed: Plugin, delta: bool) -> None:
    add_empty(installed, EMPTY)
    if installed.program == "resource-gpu":
        given: Request = {"resource_request": R({P: 2})}
    else:
        given = {"resource_request": {"volumes": ["/data0:1T"]}}
    for node in (EMPTY, GHOST):
        answer = installed.ok(
            "set-node-resource-capacity", {"nodename": node, **given, "delta": delta, "incr": True}
        )
        if node == EMPTY:
            edited = answer
    assert answer == edited  # before: the empty node; after: the same capacity
    assert renamed(installed.info(GHOST), GHOST, EMPTY) == installed.info(EMPTY)
    (event,) = installed.history(GHOST)
    assert event["seq"] == 1
    assert event["verb"] == "set-node-resource-capacity"
    assert event["by"]
    assert event["kind"] == ("capacity_changed" if delta else "capacity_set")
    # The node now exists: add-node refuses it, as any node added.
    assert "already exists" in installed.fails("add-node", {"nodename": GHOST, "resource": None})


def test_a_usage_edit_past_an_empty_nodes_capacity_is_refused_and_writes_nothing(
    plugin: Plugin,
) -> None:
    request = {"nodename": GHOST, "resource": R({P: 1}), "delta": True, "incr": True}
    line = plugin.fails("set-node-resource-usage", request)
    assert line.startswith(f"resource-gpu set-node-resource-usage: node {GHOST}: ")
    assert "exceed its capacity" in line
    never_written(plugin, GHOST)


def test_a_node_never_seen_has_nothing_to_fix_and_reads_as_null(installed: Plugin) -> None:
    line = installed.fails("fix-node-resource", {"nodename": GHOST, "workloads_resource": []})
    assert line == f"{installed.program} fix-node-resource: node {GHOST}: node not exists"
    never_written(installed, GHOST)


def test_an_edit_that_changes_nothing_creates_nothing(installed: Plugin) -> None:
    """``node set`` with nothing for this plugin reads the empty node and leaves it so."""
    request = {"nodename": GHOST, "resource_request": {}, "delta": True, "incr": True}
    answer = installed.ok("set-node-resource-capacity", request)
    assert answer["before"] == answer["after"]
    never_written(installed, GHOST)


@pytest.mark.parametrize("read", [None, {}], ids=["null", "empty"])
def test_core_s_rollback_of_a_removal_writes_nothing_for_a_node_never_seen(
    installed: Plugin, read: Any
) -> None:
    """Core's RemoveNode reads every plugin first (a node never seen reads ``null``) and, when
    another plugin fails, restores each with ``set-node-resource-info`` of what it read: that
    leaves the node empty, as it was, and writes nothing (round six: resource-gpu wrote a
    record, and ``nodes`` listed a node with no cards)."""
    installed.ok("set-node-resource-info", {"nodename": GHOST, "capacity": read, "usage": read})
    never_written(installed, GHOST)


def test_core_s_rollback_of_a_removal_writes_nothing_for_a_node_removed(
    installed: Plugin,
) -> None:
    """The same for a node this plugin removed: no record comes back, no event is added."""
    add_empty(installed, EMPTY)
    installed.ok("remove-node", {"nodename": EMPTY})
    before = installed.history(EMPTY)
    installed.ok("set-node-resource-info", {"nodename": EMPTY, "capacity": {}, "usage": {}})
    assert installed.info(EMPTY) is None
    assert installed.history(EMPTY) == before


# -- two creators of one node ---------------------------------------------------------------


def raced(plugin: Plugin, verb: str, decide_: Decide, creator_cards: int) -> Appended[Any]:
    """``decide_`` appended to GHOST in this process, as ``verb``; just before its write is
    sent, a creator, a process of its own (as on another host: it takes no turn with this
    one, ``ledger.store.turns``), adds ``creator_cards`` to GHOST's capacity (which creates
    its record). The creator must have run."""
    ran: list[str] = []
    elsewhere = plugin.workdir / "another-host"  # its own runtime directory: no turns shared
    elsewhere.mkdir(mode=0o700, exist_ok=True)

    def creator(node: str, end: int, op: str) -> None:
        if not ran:
            ran.append(op)
            request: dict[str, Any] = {"nodename": node, "resource_request": R({P: creator_cards})}
            request |= {"delta": True, "incr": True}
            done = plugin.run(
                "set-node-resource-capacity", request, env={"XDG_RUNTIME_DIR": str(elsewhere)}
            )
            assert done.status == 0, done.stderr

    settings = EtcdConfig(machines=plugin.endpoints, prefix=plugin.prefix)
    store = Store(settings, GPU, write_hook=creator)
    try:
        appended = store.appender.append(GHOST, verb, decide_)
    finally:
        store.etcd.close()
    assert ran, "the creator never ran"
    return appended


def test_two_creators_racing_on_one_absent_record_lose_no_edit(plugin: Plugin) -> None:
    """The first creator decides on the empty node; before its write is sent, the second
    creates the record (a process of its own). The first's compare-and-swap on the absent
    record fails, it decides again on the record now there, and both edits stand."""
    appended = raced(
        plugin,
        "set-node-resource-capacity",
        lambda s: decide.set_capacity(GHOST, s, {P: 3}, delta=True, incr=True),
        creator_cards=2,
    )
    assert appended.before is not None and counts(R(appended.before.capacity)) == {P: 2}
    assert counts(plugin.info(GHOST)["capacity"]) == {P: 5}
    assert [event["seq"] for event in plugin.history(GHOST)] == [1, 2]


def test_a_usage_replace_racing_a_capacity_creator_loses_neither(plugin: Plugin) -> None:
    """Core's rollback replaces usage, and is never refused for capacity: decided on the empty
    node, it loses the race to a capacity edit that creates the record, and is decided again
    on that record. Then a deploy past the capacity both left is refused."""
    raced(
        plugin,
        "set-node-resource-usage",
        lambda s: decide.set_usage(GHOST, s, {P: 1}, workloads=None, delta=False, incr=True),
        creator_cards=1,
    )
    info = plugin.info(GHOST)
    assert (counts(info["capacity"]), counts(info["usage"])) == ({P: 1}, {P: 1})
    assert [event["kind"] for event in plugin.history(GHOST)] == ["capacity_changed", "usage_set"]
    deploy = {"nodename": GHOST, "resource": R({P: 1}), "delta": True, "incr": True}
    assert "exceed its capacity" in plugin.fails("set-node-resource-usage", deploy)


def test_creators_racing_as_processes_lose_no_edit(installed: Plugin) -> None:
    """Four processes at once each add to the capacity of a node never seen."""
    if installed.program == "resource-gpu":
        given: Request = {"resource_request": R({P: 1})}
    else:
        given = {"resource_request": {"storage": "1G"}}
    nodes = [f"{GHOST}{i}" for i in range(3)]
    failures: list[str] = []

    def create(node: str) -> None:
        request = {"nodename": node, **given, "delta": True, "incr": True}
        result = installed.run("set-node-resource-capacity", request)
        if result.status != 0:
            failures.append(result.stderr)

    threads = [threading.Thread(target=create, args=(n,)) for n in nodes for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for node in nodes:
        capacity = installed.info(node)["capacity"]
        if installed.program == "resource-gpu":
            assert counts(capacity) == {P: 4}
        else:
            assert capacity["storage"] == 4 * 2**30
        assert [event["seq"] for event in installed.history(node)] == [1, 2, 3, 4]
