"""Many plugin processes on one node at once, with no lock: compare-and-swap keeps the ledger exact.

Each worker thread runs the real binary (a separate OS process per call) in a loop, as core does
when several deploys and removals land on one node together. Every deployed workload carries a
product of its own (a tag), so each call's event, if it left one, can be told apart from every
other call's by the workloads it records.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.etcdkv import Etcd, upstream_head
from tests.plugin import Plugin, R, counts, failure_line

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

WORKERS = 8
CALLS_PER_WORKER = 15
PRODUCTS = ("nvidia-3090", "nvidia-a100", "nvidia-t4")

Cards = dict[str, int]
CAPACITY: Cards = {
    **dict.fromkeys(PRODUCTS, 1000),
    **{f"tag-{seed}-{n}": 1 for seed in range(WORKERS) for n in range(2 * CALLS_PER_WORKER)},
}
"""Room for every workload the workers deploy (no call is refused for want of cards): each
tag once, and more of each product than the workers ever hold together."""
Signature = tuple[bool, tuple[tuple[tuple[str, int], ...], ...]]
"""A call as its event records it: deploy (True) or release, and the workloads' cards."""


def add(left: Cards, right: Cards, sign: int = 1) -> Cards:
    merged = dict(left)
    for product, count in right.items():
        merged[product] = merged.get(product, 0) + sign * count
    return {p: n for p, n in sorted(merged.items()) if n != 0}


def total(maps: list[Cards]) -> Cards:
    result: Cards = {}
    for cards in maps:
        result = add(result, cards)
    return result


def frozen(cards: Cards) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(cards.items()))


def signature(incr: bool, workloads: list[Cards]) -> Signature:
    return incr, tuple(frozen(w) for w in workloads)


def event_signature(event: dict[str, Any]) -> Signature:
    change = event["change"]
    return signature(
        any(n > 0 for n in change["delta"].values()), list(change.get("workloads") or [])
    )


@dataclass
class Call:
    delta: Cards
    """The signed change the call asked for."""
    signature: Signature
    ok: bool
    before: Cards | None = None
    after: Cards | None = None
    error: str = ""


def worker(
    plugin: Plugin, node: str, seed: int, start: threading.Barrier, host: dict[str, str]
) -> list[Call]:
    """Deploy random workloads and release some of the ones this worker took; ``host``: the
    environment that makes its calls another host's (:func:`hosts`), or none."""
    rng = random.Random(seed)
    tags = itertools.count()
    held: list[Cards] = []
    calls: list[Call] = []
    start.wait()
    for _ in range(CALLS_PER_WORKER):
        if held and rng.random() < 0.4:
            how_many = rng.randint(1, min(2, len(held)))
            workloads = [held.pop(rng.randrange(len(held))) for _ in range(how_many)]
            incr = False
        else:
            workloads = [
                {
                    **{p: rng.randint(1, 3) for p in rng.sample(PRODUCTS, rng.randint(1, 2))},
                    f"tag-{seed}-{next(tags)}": 1,
                }
                for _ in range(rng.randint(1, 2))
            ]
            incr = True
        request = {
            "nodename": node,
            "workloads_resource": [R(w) for w in workloads],
            "delta": True,
            "incr": incr,
        }
        result = plugin.run("set-node-resource-usage", request, env=host)
        delta = total(workloads) if incr else add({}, total(workloads), -1)
        called = signature(incr, workloads)
        if result.status == 0:
            assert result.stderr == ""
            answer = result.answer
            call = Call(delta, called, True, counts(answer["before"]), counts(answer["after"]))
            assert call.after == add(call.before or {}, delta)
            if incr:
                held.extend(workloads)
        else:
            failure_line(result, "set-node-resource-usage")
            call = Call(delta, called, False, error=result.stderr)
            if not incr:
                held.extend(workloads)  # not released: still ours
        calls.append(call)
    return calls


def hosts(tmp_path: Path, count: int) -> list[dict[str, str]]:
    """An environment per worker that makes its calls another host's: a runtime directory of
    its own, so that its writes take no turns with the others' (``ledger.store.turns``) and
    race them at etcd, as writers on different hosts do (and, with the helper on, a helper of
    its own)."""
    made = []
    for n in range(count):
        directory = tmp_path / f"host-{n}"
        directory.mkdir(mode=0o700)
        made.append({"XDG_RUNTIME_DIR": str(directory)})
    return made


@pytest.mark.parametrize(
    ("max_attempts", "one_host"),
    [(0, True), (0, False), (1, False)],
    ids=["one host", "a host each", "a host each, one try"],
)
def test_concurrent_deploys_and_releases_on_one_node(
    plugin: Plugin, etcd: Etcd, tmp_path: Path, max_attempts: int, one_host: bool
) -> None:
    """By default (retries for as long as the call's time lasts) every call lands, whether the
    writers take turns on one host or race from a host each; with one attempt, lost races
    must fail clearly ("contention") and leave nothing behind; the ledger stays exact in
    each case."""
    plugin.write_config(max_attempts=max_attempts)
    node = "hot"
    plugin.add(node, CAPACITY)
    start = threading.Barrier(WORKERS)
    with ThreadPoolExecutor(WORKERS) as pool:
        envs = [{}] * WORKERS if one_host else hosts(tmp_path, WORKERS)
        futures = [
            pool.submit(worker, plugin, node, seed, start, envs[seed]) for seed in range(WORKERS)
        ]
        calls = [call for future in futures for call in future.result()]

    succeeded = [c for c in calls if c.ok]
    assert len(calls) == WORKERS * CALLS_PER_WORKER
    assert succeeded, "no call succeeded"
    failures = [c.error for c in calls if not c.ok]
    if max_attempts != 1:
        assert failures == []
    else:  # 120 racing calls with no retry: some lose (a miss is ~1e-9 likely)
        assert failures, "no call lost a race: the contention path went untested"
        assert all("contention" in line for line in failures), failures
    expected_usage = total([c.delta for c in succeeded])
    assert all(n > 0 for n in expected_usage.values())

    info = plugin.info(node)
    assert counts(info["usage"]) == expected_usage
    assert counts(info["capacity"]) == CAPACITY

    events = etcd.event_docs(node)
    changed = [c for c in succeeded if c.delta]
    assert len(events) == len(changed) + 1
    lost = sum(event.get("retries", 0) for event in events)
    if one_host:  # each write in its turn: none raced another at etcd
        assert lost == 0, f"{lost} races lost by writers of one host"
    elif max_attempts != 1:
        assert lost, "no write lost a race: the writers did not race"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [kv.key for kv in etcd.events(node)] == [
        etcd.event_key(node, s) for s in range(1, len(events) + 1)
    ]
    ops = [e["op"] for e in events]
    assert len(set(ops)) == len(ops), "two events share an op"
    head = etcd.head(node)
    assert head is not None
    assert head.json()["seq"] == len(events)
    assert counts(head.json()["usage"]) == expected_usage

    # Every successful call is exactly one event, and the calls' before/after pairs are the
    # consecutive states of the stream: the writes were serialised, none lost or doubled.
    assert events[0]["change"]["kind"] == "node_added"
    assert all(e["change"]["kind"] == "usage_changed" for e in events[1:])
    assert Counter(frozen(e["change"]["delta"]) for e in events[1:]) == Counter(
        frozen(c.delta) for c in changed
    )
    states: list[Cards] = [{}]
    for event in events[1:]:
        states.append(add(states[-1], event["change"]["delta"]))
    assert states[-1] == expected_usage
    assert Counter(pairwise(map(frozen, states))) == Counter(
        (frozen(c.before or {}), frozen(c.after or {})) for c in changed
    )

    # Call by call: each success is exactly one event, and no call that reported failure left
    # one (a failed deploy's tags are never used again; a failed release may be retried, and
    # then only its success may show).
    recorded = Counter(event_signature(e) for e in events[1:])
    assert recorded == Counter(c.signature for c in succeeded)
    assert set(recorded.values()) == {1}
    failed_only = {c.signature for c in calls if not c.ok} - {c.signature for c in succeeded}
    assert not failed_only & recorded.keys(), "a call that reported failure left an event"

    # The head agrees with the fold of its stream, as the auditors' check sees it.
    verified = plugin.run("verify", None, node)
    assert verified.status == 0, verified.stdout + verified.stderr
    assert verified.stderr == ""
    assert "1 node verified" in verified.stdout, verified.stdout


def test_concurrent_add_node_of_one_new_node(plugin: Plugin, etcd: Etcd) -> None:
    for round_ in range(3):
        node = f"new-{round_}"
        start = threading.Barrier(WORKERS)

        def add_node(i: int, node: str = node, start: threading.Barrier = start) -> Any:
            start.wait()
            request = {"nodename": node, "resource": R({"nvidia-3090": i + 1})}
            return plugin.run("add-node", request)

        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(add_node, range(WORKERS)))

        winners = [i for i, r in enumerate(results) if r.status == 0]
        assert len(winners) == 1, [r.stderr for r in results]
        for i, result in enumerate(results):
            if i in winners:
                assert result.stderr == ""
                continue
            failure_line(result, "add-node")
            assert result.stderr.startswith(f"resource-gpu add-node: node {node}: ")
            assert "node already exists" in result.stderr
        events = etcd.event_docs(node)
        assert [(e["seq"], e["change"]["kind"]) for e in events] == [(1, "node_added")]
        winner_capacity = {"nvidia-3090": winners[0] + 1}
        assert counts(plugin.info(node)["capacity"]) == winner_capacity
        assert counts(results[winners[0]].answer["capacity"]) == winner_capacity


def test_concurrent_first_writes_adopt_an_upstream_record_once(plugin: Plugin, etcd: Etcd) -> None:
    node = "legacy"
    etcd.put_upstream_head(node, upstream_head({"nvidia-3090": 100}, None))
    start = threading.Barrier(WORKERS)

    def deploy(i: int) -> list[Any]:
        start.wait()
        request = {
            "nodename": node,
            "workloads_resource": [R({"nvidia-3090": i + 1})],
            "delta": True,
            "incr": True,
        }
        return [plugin.run("set-node-resource-usage", request) for _ in range(3)]

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(deploy, range(WORKERS)))

    taken = 0
    successes = 0
    for i, runs in enumerate(results):
        for result in runs:
            if result.status == 0:
                assert result.stderr == ""
                taken += i + 1
                successes += 1
            else:
                failure_line(result, "set-node-resource-usage")
    assert successes > 0
    events = etcd.event_docs(node)
    assert [e["seq"] for e in events] == list(range(1, successes + 2))
    assert events[0]["change"]["kind"] == "adopted"
    assert events[0]["change"]["capacity"] == {"nvidia-3090": 100}
    assert [e["change"]["kind"] for e in events[1:]] == ["usage_changed"] * successes
    assert events[0]["op"] == events[1]["op"]
    assert len({e["op"] for e in events[1:]}) == successes
    assert counts(plugin.info(node)["usage"]) == {"nvidia-3090": taken}


def test_racing_increments_never_take_a_product_past_its_capacity(
    plugin: Plugin, etcd: Etcd
) -> None:
    """20 processes each take 1 of 8 cards at once, with no lock: exactly 8 land, the other
    12 are refused in one line and leave no event. The capacity check is decided on the state
    each compare-and-swap checks, so it holds across lost races and their retries."""
    racers = 20
    plugin.add("hot", {"nvidia-3090": 8})
    start = threading.Barrier(racers)
    deploy = {
        "nodename": "hot",
        "workloads_resource": [R({"nvidia-3090": 1})],
        "delta": True,
        "incr": True,
    }

    def take(_: int) -> Any:
        start.wait()
        return plugin.run("set-node-resource-usage", deploy)

    with ThreadPoolExecutor(racers) as pool:
        results = list(pool.map(take, range(racers)))
    landed = [r for r in results if r.status == 0]
    refused = [failure_line(r, "set-node-resource-usage") for r in results if r.status != 0]
    assert len(landed) == 8, [r.stderr for r in results]
    assert all("would exceed its capacity" in line for line in refused), refused
    assert sorted(counts(r.answer["after"])["nvidia-3090"] for r in landed) == list(range(1, 9))
    assert counts(plugin.info("hot")["usage"]) == {"nvidia-3090": 8}
    assert len(etcd.event_docs("hot")) == 1 + 8
