"""Faults: lost answers, dead and hanging etcd, a killed cluster member, a restarted server.

Each test starts the etcd processes it breaks; nothing here touches the shared server.

The faults strike *during* runs of calls: a run through a proxy that drops answers at random;
background callers while etcd is killed and restarted, or while the cluster member they talk to
dies. Then the ledger is audited. Every call carries a fingerprint, a product of its own
(``call-007``) with one card in one of its workloads, which no other call touches; it shows in
the stream (the events whose delta names it) and in the final usage (how far that product moved
from its seed). So each call's effect is counted twice over, whatever order the calls ran in and
whatever op id they wrote, and a call applied twice cannot hide.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.etcd_server import Cluster, Member, free_port, healthy
from tests.faults import AnswerDroppingProxy, RewritingProxy, SilentListener, TricklingServer
from tests.plugin import Plugin, R, Result, counts, failure_line

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

ONE = {"nvidia-3090": 1}
NODE = "n1"
NODES = ("n1", "n2")
VERB = "set-node-resource-usage"
SHARED = "nvidia-3090"
"""The model every call takes or gives back cards of, besides its fingerprint."""
SEED_SHARED = 1000
"""Shared cards in use before a run: more than any run can give back, even twice over."""
SEED_TAG = 2
TAG_CAPACITY = 4
"""Each fingerprint starts at 2 of 4 cards: one call moves it to 1 or 3, a second apply to 0
or 4, both still valid, so a double apply is recorded rather than refused."""
CALL_TIMEOUT = 30.0
"""The harness's bound on one call (the binary's own budget is ``etcd.timeout``): a hang
fails the test instead of stalling it."""
WAIT = 60.0
"""How long the test waits for a condition (a success, a failure, a healthy member)."""
UNKNOWN_OUTCOME = "was sent but its answer was lost"
UNKNOWN_OP = re.compile(r"write ([0-9a-f]+) " + UNKNOWN_OUTCOME)


# -- calls with fingerprints ----------------------------------------------------------------------


def tag(index: int) -> str:
    return f"call-{index:03d}"


@dataclass
class Call:
    """One ``set-node-resource-usage`` call of a run (delta, with workloads), and its result."""

    index: int
    incr: bool
    workloads: list[dict[str, int]]
    node: str = NODE
    started: float = math.inf
    ended: float = math.inf
    result: Result | None = None
    hung: bool = False
    error: str = ""
    """An exception in the harness itself (not the binary's failure)."""

    @property
    def tag(self) -> str:
        return tag(self.index)

    @property
    def delta(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for workload in self.workloads:
            total.update(workload)
        sign = 1 if self.incr else -1
        return {product: sign * n for product, n in total.items()}

    def request(self) -> dict[str, Any]:
        return {
            "nodename": self.node,
            "workloads_resource": [R(w) for w in self.workloads],
            "delta": True,
            "incr": self.incr,
        }

    @property
    def done(self) -> bool:
        return self.ended < math.inf

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.status == 0

    @property
    def line(self) -> str:
        return self.result.stderr.strip() if self.result is not None else ""

    @property
    def unknown(self) -> bool:
        """Failed saying the write went out but its answer was lost: it may have landed."""
        return not self.ok and UNKNOWN_OUTCOME in self.line

    @property
    def op(self) -> str | None:
        """The operation id an unknown-outcome error names."""
        found = UNKNOWN_OP.search(self.line)
        return found.group(1) if found else None

    def view(self, usage: dict[str, int]) -> dict[str, int]:
        """The part of a usage map this call touches."""
        return {p: usage.get(p, 0) for p in (SHARED, self.tag)}

    def __str__(self) -> str:
        what = f"{self.node}#{self.index} {'incr' if self.incr else 'decr'} {self.delta}"
        if self.hung:
            return f"{what}: no answer within {CALL_TIMEOUT:g}s"
        if self.result is None:
            return f"{what}: {self.error or 'not run'}"
        r = self.result
        if self.ok:
            try:
                before, after = (counts(r.answer[k]) for k in ("before", "after"))
            except (ValueError, KeyError, TypeError):
                return f"{what}: exit 0, stdout {r.stdout[:300]!r}, stderr {r.stderr!r}"
            return f"{what}: answered {self.view(before)} -> {self.view(after)}"
        return f"{what}: exit {r.status}, stdout {r.stdout[:300]!r}, stderr {r.stderr!r}"


def make_calls(count: int, seed: int, node: str = NODE) -> list[Call]:
    """Mixed takes and give-backs of 1-4 shared cards in 1-2 workloads, plus the fingerprint."""
    rng = random.Random(seed)
    calls = []
    for index in range(count):
        workloads = [{SHARED: rng.randint(1, 2)} for _ in range(rng.randint(1, 2))]
        workloads[rng.randrange(len(workloads))][tag(index)] = 1
        calls.append(Call(index, incr=rng.random() < 0.6, workloads=workloads, node=node))
    return calls


def node_of(calls: list[Call]) -> str:
    (node,) = {c.node for c in calls}
    return node


def seed_node(plugin: Plugin, calls: list[Call]) -> dict[str, int]:
    """Create the calls' node with room for each fingerprint; the usage it starts with."""
    capacity = {SHARED: 10 * SEED_SHARED, **{c.tag: TAG_CAPACITY for c in calls}}
    usage = {SHARED: SEED_SHARED, **{c.tag: SEED_TAG for c in calls}}
    request = {"nodename": node_of(calls), "capacity": R(capacity), "usage": R(usage)}
    plugin.ok("set-node-resource-info", request)
    return usage


class Load:
    """Callers (threads) working through ``calls`` in order until stopped or out of calls.

    Each call is one run of the binary, bounded by ``CALL_TIMEOUT``.
    """

    def __init__(self, plugin: Plugin, calls: list[Call], workers: int) -> None:
        self._plugin = plugin
        self.calls = calls
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Start no more calls; wait for those running."""
        self._stop.set()
        self.join()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=CALL_TIMEOUT + 10)
        assert not any(t.is_alive() for t in self._threads), "a caller did not finish"

    def _take(self) -> Call | None:
        with self._lock:
            if self._stop.is_set() or self._next >= len(self.calls):
                return None
            call = self.calls[self._next]
            self._next += 1
            call.started = time.monotonic()
            return call

    def _work(self) -> None:
        while (call := self._take()) is not None:
            try:
                call.result = self._plugin.run(VERB, call.request(), timeout=CALL_TIMEOUT)
            except subprocess.TimeoutExpired:
                call.hung = True
            except Exception as exc:  # recorded, and asserted on: never lost
                call.error = f"harness error: {exc!r}"
            call.ended = time.monotonic()

    def finished(self, since: float = -math.inf) -> list[Call]:
        """The calls that ended, of those started at or after ``since``."""
        return [c for c in self.calls if c.done and c.started >= since]

    def ran(self) -> list[Call]:
        return [c for c in self.calls if c.done]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    """Poll until ``condition`` holds; a bound for a stuck run, never a timing assertion."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:g}s")
        time.sleep(0.05)


# -- the audit ------------------------------------------------------------------------------------


def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    total = dict(a)
    for product, n in b.items():
        total[product] = total.get(product, 0) + n
    return {p: n for p, n in total.items() if n}


def replay(
    events: list[dict[str, Any]],
) -> list[tuple[dict[str, Any], dict[str, int], dict[str, int]]]:
    """Each event with the usage before and after it, folded here from the stream."""
    usage: dict[str, int] = {}
    steps = []
    for event in events:
        change = event["change"]
        before = usage
        if change["kind"] == "usage_changed":
            usage = add(usage, change["delta"])
        elif change["kind"] == "node_info_set":
            usage = add({}, change["usage"])
        else:
            raise AssertionError(f"no call of these tests appends {change['kind']}: {event}")
        steps.append((event, before, usage))
    return steps


@dataclass
class Audit:
    """What the ledger shows of a run of calls."""

    calls: int
    succeeded: int
    unknown: int
    unknown_landed: int
    failed: int
    events: int
    duplicate_op_events: int
    """Events whose op id another event of the stream also has."""
    applied_twice: list[int]
    """Calls whose fingerprint shows more than once, in the stream or in the final usage."""
    problems: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    """The seed plus every successful call, plus every unknown-outcome call whose op landed."""

    @property
    def double_applies(self) -> int:
        return self.duplicate_op_events + len(self.applied_twice)

    def __str__(self) -> str:
        return (
            f"{self.calls} calls: {self.succeeded} succeeded, {self.unknown} unknown outcome "
            f"({self.unknown_landed} landed), {self.failed} other failures; {self.events} events; "
            f"double applies {self.double_applies} ({self.duplicate_op_events} events with a "
            f"repeated op id, calls applied twice {self.applied_twice})"
        )


def audit(plugin: Plugin, calls: list[Call], seed: dict[str, int]) -> Audit:
    """Match every call (all on one node) against the stream and the final usage, by its
    fingerprint."""
    node = node_of(calls)
    history = plugin.history(node)
    steps = replay(history)
    ops = Counter(event["op"] for event in history)
    usage = counts(plugin.info(node)["usage"])
    by_tag: dict[str, list[tuple[dict[str, Any], dict[str, int], dict[str, int]]]] = {}
    problems = []
    for step in steps[1:]:  # the first is the seed
        tags = [p for p in step[0]["change"]["delta"] if p.startswith("call-")]
        if len(tags) != 1:
            problems.append(f"event {step[0]} carries {len(tags)} fingerprints, not one")
        for t in tags:
            by_tag.setdefault(t, []).append(step)

    ran = [c for c in calls if c.done]
    result = Audit(
        calls=len(ran),
        succeeded=sum(c.ok for c in ran),
        unknown=sum(c.unknown for c in ran),
        unknown_landed=0,
        failed=sum(not c.ok and not c.unknown for c in ran),
        events=len(history),
        duplicate_op_events=sum(n - 1 for n in ops.values()),
        applied_twice=[],
        problems=problems,
        usage=usage,
    )
    expected = dict(seed)
    for call in calls:
        mine = by_tag.pop(call.tag, [])
        in_usage = abs(usage.get(call.tag, 0) - seed[call.tag])
        if len(mine) > 1 or in_usage > 1:
            result.applied_twice.append(call.index)
        if len(mine) != in_usage:
            problems.append(f"{call}: {len(mine)} events but {in_usage} cards moved in usage")
        if call.ok:
            assert call.result is not None
            if len(mine) != 1:
                problems.append(f"{call}: succeeded with {len(mine)} events")
                continue
            event, before, after = mine[0]
            answer = call.result.answer
            if event["change"]["delta"] != call.delta:
                problems.append(f"{call}: its event {event} is not what it asked for")
            if (counts(answer["before"]), counts(answer["after"])) != (before, after):
                problems.append(
                    f"{call}: but its event #{event['seq']} took usage from "
                    f"{call.view(before)} to {call.view(after)}"
                )
            expected = add(expected, call.delta)
        elif call.unknown:
            if call.op is None:
                problems.append(f"{call}: an unknown outcome must name its op id")
                continue
            landed = [step for step in steps if step[0]["op"] == call.op]
            op_at = [step[0]["seq"] for step in landed]
            if op_at != [step[0]["seq"] for step in mine]:
                problems.append(
                    f"{call}: op {call.op} at events {op_at}, its fingerprint at "
                    f"{[step[0]['seq'] for step in mine]}"
                )
            if landed:
                result.unknown_landed += 1
                expected = add(expected, call.delta)
        elif mine or in_usage:
            problems.append(f"{call}: failed (not an unknown outcome) yet was applied")
    problems += [
        f"events of no call of the run: {[s[0] for s in left]}" for left in by_tag.values()
    ]
    result.expected = expected
    return result


def assert_ledger_sound(
    plugin: Plugin, calls: list[Call], seed: dict[str, int], context: str = ""
) -> Audit:
    """No double applies, one event per success, usage the fold of the calls, verify passes.

    ``context`` (e.g. how many faults were injected) starts every assertion message.
    """
    found = audit(plugin, calls, seed)
    report = f"{context}{found}"
    assert found.double_applies == 0, f"double applies: {report}"
    assert found.problems == [], f"{report}:\n" + "\n".join(found.problems)
    assert found.usage == found.expected, f"{report}: usage is not the fold of the calls"
    node = node_of(calls)
    verified = plugin.run("verify", None, node)
    assert verified.status == 0, f"{report}: verify {node}: {verified.stdout}{verified.stderr}"
    return found


def failures(calls: list[Call]) -> str:
    """The calls that did not succeed, one a line, for reports."""
    return "".join(f"\n  {c}" for c in calls if c.done and not c.ok)


def unknowns(calls: list[Call]) -> str:
    return "".join(f"\n  {c}" for c in calls if c.unknown)


def failures_not_clean(calls: list[Call], *, mention: str = "") -> list[str]:
    """Calls that hung, failed other than with one line (naming ``mention``) and exit 1, or
    succeeded with something on stderr."""
    bad = []
    for call in calls:
        if not call.done or (call.ok and call.line == ""):
            continue
        prefix = f"resource-gpu {VERB}: node {call.node}: "
        r = call.result
        if r is None:  # a hang or a harness error
            bad.append(str(call))
            continue
        lines = r.stderr.splitlines()
        if call.ok or (
            r.status != 1
            or r.stdout
            or len(lines) != 1
            or not lines[0].startswith(prefix)
            or "Traceback" in r.stderr
            or mention not in lines[0]
        ):
            bad.append(str(call))
    return bad


def talk_directly(plugin: Plugin, endpoints: list[str]) -> None:
    """Point the plugin at etcd itself, past a closed proxy."""
    plugin.endpoints = endpoints
    plugin.write_config()


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """Three members of the test's own, to kill and restart (why three: :class:`Cluster`)."""
    cluster = Cluster(3).start()
    yield cluster
    cluster.stop()


# -- ambiguous commits ----------------------------------------------------------------------------


def test_writes_whose_answers_are_lost_at_random_are_each_applied_once(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    """Two callers, 24 mixed calls; the proxy drops the answer to ~40% of writes (seeded).

    With two writers a dropped answer may belong to a write that lost its compare-and-swap,
    so the retry must tell "landed" from "lost the race" by its op id, not assume either.
    """
    proxy = AnswerDroppingProxy(etcd_endpoints[0])
    try:
        plugin = Plugin([proxy.url], tmp_path)
        calls = make_calls(24, seed=20)
        seed = seed_node(plugin, calls)
        proxy.drop_at_random(0.4, seed=7)
        with Load(plugin, calls, workers=2) as load:
            load.join()
        writes, faults = proxy.writes_seen, proxy.faults_injected
    finally:
        proxy.close()
    talk_directly(plugin, etcd_endpoints)

    assert all(c.done for c in calls)
    assert failures_not_clean(calls) == [], "failures that are not one clear line"
    injected = f"{faults} faults injected over {writes} writes; "
    found = assert_ledger_sound(plugin, calls, seed, injected)
    report = f"{injected}{found}{failures(calls)}"
    assert faults > 0, report
    assert found.succeeded > 0, report
    print(report)


def test_the_answer_of_a_retried_write_reports_what_it_did(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    proxy = AnswerDroppingProxy(etcd_endpoints[0])
    try:
        plugin = Plugin([proxy.url], tmp_path)
        plugin.add(NODE, {"nvidia-3090": 8})
        proxy.arm()
        answer = plugin.ok(
            VERB,
            {
                "nodename": NODE,
                "resource_request": R({"nvidia-3090": 3}),
                "delta": True,
                "incr": True,
            },
        )
    finally:
        proxy.close()
    talk_directly(plugin, etcd_endpoints)
    assert proxy.faults_injected == 1
    assert counts(answer["before"]) == {}
    assert counts(answer["after"]) == {"nvidia-3090": 3}
    events = plugin.history(NODE)
    assert [e["change"]["kind"] for e in events] == ["node_added", "usage_changed"]


# -- fail fast ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_an_unreachable_etcd_gives_one_clear_line(tmp_path: Path, kind: str) -> None:
    silent = SilentListener() if kind == "silent" else None
    url = silent.url if silent else f"http://127.0.0.1:{free_port()}"
    try:
        plugin = Plugin([url], tmp_path, timeout=2)
        for verb, request in [
            ("get-node-resource-info", {"nodename": "n1"}),
            ("add-node", {"nodename": "n1", "resource": R(ONE)}),
        ]:
            line = plugin.fails(verb, request)  # the subprocess is bounded: a hang fails
            assert "node n1" in line
            assert "etcd" in line
    finally:
        if silent:
            silent.close()


def test_a_reply_that_trickles_in_runs_out_of_etcd_timeout(tmp_path: Path) -> None:
    """Over HTTP, etcd.timeout bounds a request whole, not each read from its socket: a reply
    sent a byte every 0.2 s (each read answered in time) fails the call once 3 s are spent,
    in-process and through the helper. It ran on past core's 30 s kill, here past the
    harness's bound on a call, which fails the test."""
    trickle = TricklingServer(every=0.2)
    try:
        plugin = Plugin([trickle.url], tmp_path, timeout=3, transport="http")
        for verb, request in [
            ("get-node-resource-info", {"nodename": "n1"}),
            ("set-node-resource-usage", {"nodename": "n1", "resource": R(ONE), "delta": True}),
        ]:
            result = plugin.run(verb, request, timeout=CALL_TIMEOUT)
            line = failure_line(result, verb)
            assert "node n1" in line and "etcd" in line, line
    finally:
        trickle.close()


PAGE = b"<html><body>upstream error</body></html>"
ERROR_PAGE = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n"
    + f"Content-Length: {len(PAGE)}\r\n\r\n".encode()
    + PAGE
)
NOT_JSON = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


@pytest.mark.parametrize("answer", [ERROR_PAGE, NOT_JSON], ids=["a 500 page", "a 200 not JSON"])
def test_a_write_answered_by_someone_else_is_settled_by_its_op_id(
    etcd_endpoints: list[str], tmp_path: Path, answer: bytes
) -> None:
    """A proxy forwards the write to etcd, which applies it, and answers with its own page:
    the outcome is unknown, so the write is settled by its op id, and found landed (it was said
    "nothing was written", or an internal error, before). Reads pass through the proxy."""
    proxy = RewritingProxy(etcd_endpoints[0], answer)
    try:
        plugin = Plugin([proxy.url, *etcd_endpoints], tmp_path, transport="http")
        added = plugin.run("add-node", {"nodename": NODE, "resource": R({SHARED: 4})})
        assert proxy.rewritten == 1
        assert added.status == 0, added.stderr
        assert counts(json.loads(added.stdout)["capacity"]) == {SHARED: 4}
        took = plugin.run(VERB, {"nodename": NODE, "resource": R(ONE), "delta": True,
                                 "incr": True})  # fmt: skip
        assert proxy.rewritten == 2 and took.status == 0, took.stderr
        info = plugin.info(NODE)
        assert counts(info["usage"]) == ONE  # once
        assert len(plugin.history(NODE)) == 2
    finally:
        proxy.close()


# -- crash and restart ----------------------------------------------------------------------------


def kill_timer(kill: Callable[[], None], when: list[float]) -> Callable[[], None]:
    """``kill``, noting when it began."""

    def timed() -> None:
        when.append(time.monotonic())
        kill()

    return timed


def test_etcd_killed_and_restarted_during_a_run_of_calls_loses_and_doubles_nothing(
    own_cluster: Cluster, tmp_path: Path
) -> None:
    """Callers on two nodes run calls while etcd (all three members) is killed, kept down, and
    restarted on the same data dirs. The proxy times the kill: just after etcd committed one of
    their writes, before the answer reached the plugin. That call must fail naming its op, and
    its write must be found after the restart, counted once. (One caller per node: no write
    loses a compare-and-swap, so the write the kill is timed to is one etcd applied.)"""
    proxy = AnswerDroppingProxy(own_cluster.members[0].client_url)
    try:
        plugin = Plugin([proxy.url], tmp_path, timeout=3)
        runs = {node: make_calls(150, seed=30 + i, node=node) for i, node in enumerate(NODES)}
        seeds = {node: seed_node(plugin, calls) for node, calls in runs.items()}
        kills: list[float] = []
        with Load(plugin, runs["n1"], workers=1) as n1, Load(plugin, runs["n2"], workers=1) as n2:

            def ran(since: float = -math.inf) -> list[Call]:
                return n1.finished(since) + n2.finished(since)

            wait_for(lambda: sum(c.ok for c in ran()) >= 4, "successes before the kill")
            proxy.crash_on_next_write(kill_timer(own_cluster.kill, kills), at_answer=True)
            wait_for(proxy.crashed.is_set, "write to kill etcd on")
            killed = kills[0]
            time.sleep(1.5)
            # Down until the call whose write died with etcd has failed: it cannot succeed now.
            wait_for(lambda: any(c.unknown for c in ran()), "unknown-outcome failure")
            own_cluster.start()
            restarted = time.monotonic()
            wait_for(lambda: len(ran(restarted)) >= 6, "calls after the restart")

        outage = [c for c in ran() if c.ended >= killed and c.started < restarted]
        assert failures_not_clean(ran(), mention="etcd") == [], "failures that are not one line"
        assert [str(c) for c in ran() if c.ended < killed and not c.ok] == [], "failed before"
        assert [str(c) for c in ran(restarted) if not c.ok] == [], "calls after the restart failed"
        found = {node: assert_ledger_sound(plugin, runs[node], seeds[node]) for node in NODES}
        report = "; ".join(f"{node}: {audit}" for node, audit in found.items())
        landed = sum(audit.unknown_landed for audit in found.values())
        assert landed >= 1, f"the write committed as etcd died is lost: {report}"
        print(f"{len(outage)} calls overlapped the outage; {report}{unknowns(ran())}")
    finally:
        proxy.close()


# -- cluster failover -----------------------------------------------------------------------------


def status(member: Member) -> tuple[str, str] | None:
    """(this member's id, the leader's id it knows of), or None when it does not answer."""
    request = urllib.request.Request(
        f"{member.client_url}/v3/maintenance/status", data=b"{}", method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=1) as reply:
            doc = json.loads(reply.read())
    except OSError:
        return None
    return str(doc["header"]["member_id"]), str(doc.get("leader", "0"))


def leader_of(members: list[Member]) -> Member:
    def leader() -> Member | None:
        return next((m for m in members if (s := status(m)) and s[0] == s[1]), None)

    wait_for(lambda: leader() is not None, "leader")
    found = leader()
    assert found is not None
    return found


def test_calls_keep_succeeding_when_the_member_they_talk_to_dies_under_load(
    tmp_path: Path,
) -> None:
    """Three members, all in etcd.machines, the leader first: every call tries it first, and its
    death forces an election while two callers keep calling. The proxy in front of it times the
    kill to a write just sent: whether the cluster keeps it is the cluster's business."""
    cluster = Cluster(3).start()
    proxy: AnswerDroppingProxy | None = None
    try:
        first = leader_of(cluster.members)
        first_id = (status(first) or ("?", "?"))[0]
        others = [m for m in cluster.members if m is not first]
        proxy = AnswerDroppingProxy(first.client_url)
        plugin = Plugin([proxy.url, *(m.client_url for m in others)], tmp_path, timeout=4)
        calls = make_calls(150, seed=40)
        seed = seed_node(plugin, calls)

        def elected() -> bool:
            leaders = {s[1] for s in map(status, others) if s is not None}
            return len(leaders) == 1 and not leaders & {"0", first_id}

        kills: list[float] = []
        with Load(plugin, calls, workers=2) as load:
            wait_for(lambda: sum(c.ok for c in load.ran()) >= 3, "successes before the kill")
            proxy.crash_on_next_write(kill_timer(first.kill, kills))
            wait_for(proxy.crashed.is_set, "write to kill the leader on")
            killed = kills[0]
            wait_for(elected, "new leader among the survivors")
            wait_for(lambda: all(healthy(m.client_url) for m in others), "healthy survivors")
            settled = time.monotonic()
            wait_for(lambda: len(load.finished(since=settled)) >= 8, "calls after the election")

        ran = load.ran()
        after = load.finished(since=settled)
        election = [c for c in ran if c.ended >= killed and c.started < settled]
        assert failures_not_clean(ran, mention="etcd") == [], "failures that are not one line"
        assert [str(c) for c in ran if c.ended < killed and not c.ok] == [], "failed before"
        assert [str(c) for c in after if not c.ok] == [], "calls after the election must succeed"
        found = assert_ledger_sound(plugin, calls, seed)
        print(f"{len(election)} calls overlapped the election; {found}{unknowns(ran)}")
    finally:
        if proxy is not None:
            proxy.close()
        cluster.stop()


# -- the audit itself -----------------------------------------------------------------------------


def test_the_audit_counts_a_change_made_twice(plugin: Plugin) -> None:
    """A call's change made again under another op id (a retry that did not find its first
    attempt would do that) is a double apply, and usage is no longer the fold of the calls."""
    calls = make_calls(3, seed=50)
    seed = seed_node(plugin, calls)
    for call in calls:
        call.result = plugin.run(VERB, call.request())
        call.ended = time.monotonic()
    assert audit(plugin, calls, seed).double_applies == 0
    plugin.ok(VERB, calls[1].request())
    found = audit(plugin, calls, seed)
    assert found.applied_twice == [1]
    assert found.double_applies == 1
    assert found.usage != found.expected
