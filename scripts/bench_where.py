"""``scripts/bench --where``: where a call's milliseconds go, part by part, for a read and a
write of each kind through the resident helper.

Every part is measured, none estimated:

- the whole call, and the interpreter's bare start (isolated and without ``site``, as the
  launcher ``install`` writes starts it), are medians of whole processes, run in turns;
- the imports are the median of a process that imports what the launcher does before it calls
  the helper, less the bare start;
- in this process, with the installed code, the client's steps one at a time, as far apart as
  a new process takes to get there: the config and the socket's name, connecting to the
  helper, and the call through it (the helper hands the connection to a call's process, which
  runs the verb and answers);
- the verb itself, run here as that process runs it (a session of its own, a new connection to
  etcd, and the records its writes leave kept for the next), and within it the time spent in
  etcd's round trips (the transport's ``send``, timed);
- "the rest" is what the whole process took beyond the parts: reading stdin, relaying the
  answer, and the exit (with the interpreter's tear-down, where the script still pays it).
"""

from __future__ import annotations

import io
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.launcher import launcher
from resource_extend.commands.protocol import CallIO, Session
from resource_extend.commands.registry import load_verb
from resource_extend.commands.resident import client
from resource_extend.commands.resident.client import package_dir
from resource_extend.commands.storage.plugin import PLUGIN as STORAGE
from resource_extend.ledger.etcd import transport

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin
    from scripts.benching import Bench

PARTS = (
    "interpreter start",
    "imports",
    "config and socket name",
    "connecting to the helper",
    "hand-off to the call's process, and back",
    "the verb, without etcd",
    "etcd's round trips",
    "the rest: stdin, relaying the answer, exit",
)


START = [sys.executable, "-I", "-S", "-c"]
"""The interpreter as the launcher starts it (``commands.launcher``), given a program."""
BARE = "import posix; posix._exit(0)"
"""The interpreter's start alone: it ends as the launcher does, without the tear-down
(``commands.main.run``), so that the tear-down of what is imported is no part's."""


def whole_process_imports(plugin: Plugin) -> str:
    """What the launcher imports before it asks the helper (``commands.main``, the program's
    names, the client), and its exit."""
    launched = launcher(plugin, sys.executable, package_dir())
    asks = "import resource_extend.commands.resident.client"
    made = launched.replace("\nrun(Program(", "\nprogram = (Program(")  # made, not run
    return f"{made}{asks}\n{BARE}"


@contextmanager
def etcd_timed() -> Iterator[list[float]]:
    """Seconds spent in each of etcd's round trips (HTTP transport) while inside."""
    spent: list[float] = []
    send = transport.HttpTransport.send

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return send(self, *args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    transport.HttpTransport.send = timed  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        transport.HttpTransport.send = send  # type: ignore[method-assign]


@contextmanager
def stdout_caught() -> Iterator[None]:
    """The helper's answer, relayed to ``sys.stdout``, caught instead."""
    real = sys.stdout
    sys.stdout = io.TextIOWrapper(io.BytesIO())
    try:
        yield
    finally:
        sys.stdout = real


class Call:
    """One verb of one kind, with the requests it alternates between (a write takes and gives
    back, so that the node stays as it was)."""

    def __init__(self, plugin: Plugin, verb: str, requests: list[object], config: Path) -> None:
        self.plugin = plugin
        self.verb = verb
        self.requests = [json.dumps(r).encode() for r in requests]
        self.config = str(config)

    def stdin(self, i: int) -> bytes:
        return self.requests[i % len(self.requests)]

    def client_steps(self, times: int, gap: float) -> tuple[float, float, float]:
        """Medians of the client's steps: config and socket name, connect, the call; ``gap``
        seconds apart, as core's calls come (each a new process, so never closer than its
        start)."""
        named, connected, called = [], [], []
        with stdout_caught():
            for i in range(times):
                time.sleep(gap)
                start = time.perf_counter()
                path = client.config_file(self.plugin, self.config)
                assert path is not None, self.config
                code = client.installation()
                name = client.socket_name(path, code)
                found = time.perf_counter()
                link = client.Link.connect(self.plugin.name, name)
                assert link is not None, "no helper answers: warm it up first"
                linked = time.perf_counter()
                try:
                    request = client.call_request(self.verb, path, code, self.stdin(i))
                    outcome = link.call(self.verb, request)
                finally:
                    link.close()
                done = time.perf_counter()
                assert outcome.status == 0, (self.verb, outcome.status)
                named.append(found - start)
                connected.append(linked - found)
                called.append(done - linked)
        return statistics.median(named), statistics.median(connected), statistics.median(called)

    def in_process(self, times: int) -> tuple[float, float, int]:
        """Medians of the verb run here as a call's process runs it, of the etcd round trips
        within it, and of how many there were."""
        verb = load_verb(self.plugin, self.verb)
        assert verb is not None
        whole, etcd, trips = [], [], []
        for i in range(times):
            out, err = io.BytesIO(), io.BytesIO()
            session: Session[Any] = Session(
                self.plugin, self.config, CallIO(io.BytesIO(self.stdin(i)), out, err)
            )
            with etcd_timed() as spent:
                start = time.perf_counter()
                verb(session)
                whole.append(time.perf_counter() - start)
            assert not err.getvalue(), err.getvalue()
            etcd.append(sum(spent))
            trips.append(len(spent))
        return statistics.median(whole), statistics.median(etcd), int(statistics.median(trips))


def where_rows(bench: Bench, calls: list[tuple[str, Call]]) -> list[str]:
    """The table: a column for each call, a row for each part, in milliseconds. The whole
    processes are run in turns (the call, the bare start, the imports), so that a machine
    slower for a while is slower for all three."""
    from scripts.benching import run

    times = bench.repeat * 3
    columns: list[list[float]] = []
    totals: list[float] = []
    counts: list[int] = []
    for _, call in calls:
        argv = [call.plugin.name, "--config", call.config, call.verb]
        imports = [*START, whole_process_imports(call.plugin)]
        wholes, bares, imported = [], [], []
        for i in range(times):
            wholes.append(run(argv, call.stdin(i)).seconds)
            bares.append(run([*START, BARE]).seconds)
            imported.append(run(imports).seconds)
        whole, bare = statistics.median(wholes), statistics.median(bares)
        loaded = statistics.median(imported)
        named, connected, called = call.client_steps(times, gap=loaded)
        verb, etcd, trips = call.in_process(times)
        counts.append(trips)
        parts = [bare, loaded - bare, named, connected, called - verb, verb - etcd, etcd]
        parts.append(whole - sum(parts))
        columns.append(parts)
        totals.append(whole)
    lines = [
        "| part of a call (ms) | " + " | ".join(what for what, _ in calls) + " |",
        "|---" * (len(calls) + 1) + "|",
    ]
    for index, part in enumerate(PARTS):
        cells = [f"{column[index] * 1000:.2f}" for column in columns]
        lines.append(f"| {part} | " + " | ".join(cells) + " |")
    shown = " | ".join(f"**{total * 1000:.2f}**" for total in totals)
    lines.append(f"| **the whole call** | {shown} |")
    lines.append("| etcd's round trips, how many | " + " | ".join(map(str, counts)) + " |")
    return lines


def gpu_and_storage_calls(bench: Bench, storage_config: Path) -> list[tuple[str, Call]]:
    """A read and a write of each kind, on the nodes ``single_node`` and ``storage_rows``
    seeded; and the storage read again, once the node's record is this plugin's."""
    from scripts.bench_storage import WORKLOAD
    from scripts.benching import PRODUCT

    cards = {"prod_count_map": {PRODUCT: 1}}
    take = {"nodename": "short", "resource_request": cards, "delta": True, "incr": True}
    stake = {"nodename": "short", "workloads_resource": [WORKLOAD], "delta": True, "incr": True}
    read = {"nodename": "short"}
    gives, sgives = {**take, "incr": False}, {**stake, "incr": False}
    return [
        ("gpu read", Call(GPU, "get-node-resource-info", [read], bench.config)),
        ("gpu write", Call(GPU, "set-node-resource-usage", [take, gives], bench.config)),
        ("storage read", Call(STORAGE, "get-node-resource-info", [read], storage_config)),
        (
            "storage write",
            Call(STORAGE, "set-node-resource-usage", [stake, sgives], storage_config),
        ),
        # The storage node is seeded as the upstream plugin writes it: until this plugin's
        # first write, its record names no stream end, which costs a read a second round trip
        # (``ledger.store.records``). The writes above have made it ours.
        (
            "storage read, once written",
            Call(STORAGE, "get-node-resource-info", [read], storage_config),
        ),
    ]
