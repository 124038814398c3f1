"""What the bench scripts share: a throwaway etcd with a :class:`Bench` on it (``benched``),
whole-process timing (``run``, ``side_by_side``, ``at_once``), the seeding of nodes and streams,
and the table's rows. ``scripts/bench.py`` runs the rows; ``bench_storage``, ``bench_secured``
and ``bench_where`` add theirs; none imports the bench's main."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.transport import HttpTransport
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.projections.gpu.events import (
    Event,
    GpuRecord,
    NodeAdded,
    UsageChanged,
    encode,
)
from resource_extend.projections.gpu.resources import Resource
from scripts.throwaway import throwaway_etcd
from tests.etcd_server import etcdctl_binary

PRODUCT = "nvidia-3090"
SEEDED_CARDS = 100_000
"""Cards of a seeded stream's node: the write rows take one per call and give none back."""
SEEDED_FITS = 6
"""Copies of a one-card request each node of a seeded fleet fits (8 cards, 2 in use)."""
PREFIX = "/bench"
WRITERS = 8
GAUGES = ("python -I -S -c pass", "etcdctl get", "etcdctl put")
"""Baselines that do the same work in every row they are run in: how far they move across a
run says how noisy it was (:meth:`Bench.noise`)."""


@dataclass
class Run:
    seconds: float
    status: int
    stderr: bytes


@dataclass(frozen=True)
class Command:
    """A whole process the bench runs: its arguments, and what it is given on stdin."""

    argv: Sequence[str]
    stdin: bytes = b""


def run(argv: Sequence[str], stdin: bytes = b"") -> Run:
    """One whole process, spawn to exit."""
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, check=False)
    return Run(time.perf_counter() - start, done.returncode, done.stderr)


def side_by_side(times: int, *commands: Command) -> list[list[float]]:
    """Each command's seconds, run ``times`` times in turns (one of each, then again; every
    run must succeed), turn by turn. In turns, a machine that slows down or speeds up midway
    (another process, a CPU's clock) weighs on each command alike: a :class:`Pair` of two
    commands' runs says how they compare turn by turn."""
    spent: list[list[float]] = [[] for _ in commands]
    for _ in range(times):
        for command, seconds in zip(commands, spent, strict=True):
            done = run(command.argv, command.stdin)
            if done.status != 0:
                _failed(command, done)
            seconds.append(done.seconds)
    return spent


@dataclass(frozen=True)
class Pair:
    """Ours and a baseline, measured in turns: their seconds (or any measure), turn by turn.

    A row's ratio and margin are the medians of the turns' own: each turn's two runs met the
    machine in the same state, so a slow minute moves both. (The ratio of the two medians
    sets one turn's run against another's: on this VM the margin of a read over the bare
    interpreter, so taken, swung twice as far across twenty sets of seven turns.)"""

    ours: Sequence[float]
    theirs: Sequence[float]

    @property
    def medians(self) -> tuple[float, float]:
        return statistics.median(self.ours), statistics.median(self.theirs)

    @property
    def ratio(self) -> float:
        """The median of the turns' ratios, ours to theirs."""
        return statistics.median(o / t for o, t in zip(self.ours, self.theirs, strict=True))

    @property
    def margin(self) -> float:
        """The median of the turns' differences, ours less theirs."""
        return statistics.median(o - t for o, t in zip(self.ours, self.theirs, strict=True))


@dataclass
class Burst:
    """``count`` processes of one command started together, round after round."""

    command: Command
    times: list[float]
    """Every process's seconds."""
    p99s: list[float]
    """Each round's p99."""
    cpu: list[float]
    """CPU seconds spent while its rounds ran (as :meth:`Bench.cpu_spent` splits them)."""

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def p99(self) -> float:
        """The median of the rounds' p99s: one slow round, a scheduler's hiccup, is not the
        result (set against another command's, round by round: :class:`Pair`)."""
        return statistics.median(self.p99s)


def at_once(
    count: int, rounds: int, commands: Sequence[Command], cpu: Callable[[], Sequence[float]]
) -> list[Burst]:
    """``count`` processes of each command started together, ``rounds`` times, the commands'
    rounds in turns (every process must succeed); ``cpu`` tells the CPU seconds spent so far,
    read before and after each round."""
    bursts = [Burst(command, [], [], [0.0] * len(cpu())) for command in commands]
    for _ in range(rounds):
        for burst in bursts:
            before = cpu()
            this_round = sorted(_together(burst.command, count))
            burst.cpu = [a + c - b for a, b, c in zip(burst.cpu, before, cpu(), strict=True)]
            burst.times += this_round
            burst.p99s.append(this_round[min(count - 1, int(count * 0.99))])
            time.sleep(0.5)
    return bursts


def _together(command: Command, count: int) -> list[float]:
    """The seconds of ``count`` processes of ``command`` started at once."""
    done: list[Run] = []
    start = threading.Barrier(count)

    def one() -> None:
        start.wait()
        done.append(run(command.argv, command.stdin))

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for failed in (r for r in done if r.status != 0):
        _failed(command, failed)
    return [r.seconds for r in done]


def _failed(command: Command, done: Run) -> NoReturn:
    """The bench stops: a row measures calls that did their work."""
    sys.exit(f"bench: {' '.join(command.argv)} failed: {done.stderr.decode().strip()}")


GNU_TIME = "/usr/bin/time"


def peak_memory_kib(command: Command) -> int | None:
    """The call's peak RSS, measured by GNU time. (A process forked from this one would report
    this one's peak: Linux carries ``ru_maxrss`` across fork and exec.)"""
    if not os.access(GNU_TIME, os.X_OK):
        return None
    argv = [GNU_TIME, "-f", "%M", *command.argv]
    done = subprocess.run(argv, input=command.stdin, capture_output=True, check=False)
    return int(done.stderr.decode().strip().splitlines()[-1])


class Bench:
    def __init__(
        self, endpoint: str, workdir: Path, transport: str, resident: bool, repeat: int
    ) -> None:
        self.endpoint = endpoint
        self.workdir = workdir
        self.transport = transport
        self.resident = resident
        self.repeat = repeat
        self.config = self.config_for(PREFIX)
        self.keys = KeyLayout(PREFIX, "gpu")
        self.etcd = HttpTransport(EtcdConfig(machines=[endpoint]))
        self.etcdctl = [etcdctl_binary(), f"--endpoints={endpoint}"]
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.gauged: dict[str, list[Sequence[float]]] = {gauge: [] for gauge in GAUGES}
        """Each gauge's runs (``GAUGES``), row by row."""

    def config_for(self, prefix: str, *, unbounded: bool = False) -> Path:
        """A config for ``prefix``, with the default stream bounds (or none at all)."""
        name = prefix.strip("/") + ("-unbounded" if unbounded else "")
        path = self.workdir / f"{name}.yaml"
        settings = {"machines": [self.endpoint], "prefix": prefix, "transport": self.transport}
        config: dict[str, object] = {"etcd": settings, "resident": self.resident}
        if unbounded:
            config["streams"] = {"budget": 0, "max_events": 0}
        path.write_text(json.dumps(config))  # JSON is YAML
        return path

    def warm_up(self, config: Path | None = None, program: str = "resource-gpu") -> None:
        """A few calls first: with the resident helper on, the first one starts the helper for
        that config; without it, the first one leaves the config's parsed copy."""
        for _ in range(5):
            call = self.call("get-nodes-resource-info", {"nodenames": ["short"]}, config, program)
            run(call.argv, call.stdin)
            time.sleep(0.2)

    def helper_memory(self) -> str:
        """The memory (VmRSS) of the resident helper serving the main config, if one does."""
        helper = self.helper_pid()
        if helper is None:
            return ""
        status = Path(f"/proc/{helper}/status").read_text()
        rss = next(line for line in status.splitlines() if line.startswith("VmRSS"))
        return f"; the resident helper holds {int(rss.split()[1]) / 1024:.0f} MiB"

    # -- seeding ------------------------------------------------------------------------------

    def put_all(self, items: list[tuple[bytes, bytes]]) -> None:
        for i in range(0, len(items), 128):
            ops = [wire.put(key, value) for key, value in items[i : i + 128]]
            self.etcd.send(0, wire.TxnRequest(success=ops), wire.TxnResponse, 30)

    def seed_upstream_heads(self, prefix: str, count: int) -> list[str]:
        """``count`` node records as the upstream plugin writes them, alone under ``prefix``."""
        names = [f"gpu-node-{i:05d}" for i in range(count)]
        head = encode(
            GpuRecord(capacity=Resource.of({PRODUCT: 8}), usage=Resource.of({PRODUCT: 2}))
        )  # each fits SEEDED_FITS copies of one card
        self.put_all([(KeyLayout(prefix, "gpu").head(name), head) for name in names])
        return names

    def seed_stream(self, node: str, length: int) -> None:
        """A node whose stream holds ``length`` events (taking and giving back one card), with
        room for every card the write rows take (a take past capacity would be refused)."""
        at = datetime.now(timezone.utc)
        capacity = {PRODUCT: SEEDED_CARDS}
        added = NodeAdded(capacity=capacity)
        events = [Event(seq=1, at=at, verb="add-node", op="seed", change=added)]
        for seq in range(2, length + 1):
            delta = {PRODUCT: 1 if seq % 2 == 0 else -1}
            events.append(
                Event(seq=seq, at=at, verb="seed", op=f"s{seq}", change=UsageChanged(delta=delta))
            )
        usage = {PRODUCT: 1} if length % 2 == 0 else {}
        head = GpuRecord(capacity=Resource.of(capacity), usage=Resource.of(usage), seq=length)
        items = [(self.keys.event(node, e.seq), encode(e)) for e in events]
        self.put_all([*items, (self.keys.head(node), encode(head))])

    # -- measuring ----------------------------------------------------------------------------

    def call(
        self,
        verb: str,
        request: object,
        config: Path | None = None,
        program: str = "resource-gpu",
    ) -> Command:
        """A call as core makes it: the program's verb, the request on stdin."""
        argv = [program, "--config", str(config or self.config), verb]
        return Command(argv, json.dumps(request).encode())

    def answer(self, verb: str, request: object, config: Path) -> Any:
        """The call's answer, once: a row measures a call that did its work."""
        argv = ["resource-gpu", "--config", str(config), verb]
        done = subprocess.run(argv, input=json.dumps(request).encode(), capture_output=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
        return json.loads(done.stdout)

    @property
    def call_goals(self) -> tuple[float, float]:
        """A read's and a write's goal against etcdctl's: with the helper, a read cheaper than
        etcdctl's (0.85x) and a write no dearer than its; without it (a whole Python process per
        call, every one), within twice etcdctl's, reads and writes alike."""
        return (0.85, 1.0) if self.resident else (2.0, 2.0)

    def ctl(self, *args: str) -> Command:
        """etcdctl, at the bench's etcd."""
        return Command([*self.etcdctl, *args])

    def compare(
        self,
        what: str,
        ours: Command,
        theirs: Command,
        against: str,
        goal: float | None,
        times: int | None = None,
    ) -> Pair:
        """A row of ``ours`` against ``theirs``, run side by side; their runs."""
        pair = Pair(*side_by_side(times or self.repeat, ours, theirs))
        self.row(what, pair, against, goal)
        return pair

    def row(self, what: str, pair: Pair, against: str, goal: float | None) -> None:
        """Each side's median, and the turns' ratio against its goal."""
        (ours, theirs), ratio = pair.medians, pair.ratio
        if against in self.gauged:
            self.gauged[against].append(pair.theirs)
        verdict = "" if goal is None else (" ✓" if ratio <= goal else " ✗")
        self.rows.append(
            (what, f"{ours * 1000:.1f} ms", f"{theirs * 1000:.1f} ms ({against})",
             f"{ratio:.2f}x{verdict}", f"≤ {goal}x" if goal else "")
        )  # fmt: skip

    def noise(self) -> str:
        """How noisy the run was, by its gauges: each one's fastest and slowest run, and the
        range of its rows' medians."""
        said = []
        for gauge, rows in self.gauged.items():
            if rows:
                runs = [seconds * 1000 for row in rows for seconds in row]
                medians = [statistics.median(row) * 1000 for row in rows]
                said.append(
                    f"{gauge} {min(runs):.1f} to {max(runs):.1f} ms over {len(runs)} runs, its "
                    f"{len(rows)} rows' medians {min(medians):.1f} to {max(medians):.1f} ms"
                )
        return "how noisy: " + "; ".join(said)

    def limit_row(self, what: str, pair: Pair, against: str, limit: float) -> None:
        """A row whose goal is a time, not a ratio: our median within ``limit`` seconds."""
        ours, theirs = pair.medians
        within = " ✓" if ours < limit else " ✗"
        self.rows.append(
            (what, f"{ours * 1000:.0f} ms", f"{theirs * 1000:.0f} ms ({against})",
             f"{pair.ratio:.2f}x", f"< {limit:g} s{within}")
        )  # fmt: skip

    # -- the runs -----------------------------------------------------------------------------

    def single_node(self) -> dict[str, int | None]:
        self.seed_stream("short", 10)
        self.warm_up()
        head_key = self.keys.head("short").decode()
        read = self.call("get-node-resource-info", {"nodename": "short"})
        get = self.ctl("get", head_key)
        # What any call pays before the plugin's own code: the interpreter's bare start as the
        # launcher starts it (isolated, without ``site``) and whole (as the venv's bin/ script
        # does: pip drops a shebang's flags), and, for a call run in-process, msgspec (which
        # imports typing, datetime, decimal, uuid and platform).
        bare = Command([sys.executable, "-I", "-S", "-c", "pass"])
        ours, theirs, floor = side_by_side(self.repeat, read, get, bare)
        goals = self.call_goals
        self.row("read: get-node-resource-info", Pair(ours, theirs), "etcdctl get", goals[0])
        take = {
            "nodename": "short",
            "workloads_resource": [{"prod_count_map": {PRODUCT: 1}}],
            "delta": True,
            "incr": True,
        }
        write = self.call("set-node-resource-usage", take)
        put = self.ctl("put", f"{PREFIX}/scratch", "x")
        self.compare("write: set-node-resource-usage", write, put, "etcdctl put", goals[1])
        verbs = Command(["resource-gpu", "verbs"])
        self.compare("verbs (no etcd, in-process)", verbs, get, "etcdctl get", None)
        above_floor = Pair(ours, floor)
        self.row("read against the floor: python -I -S -c pass", above_floor,
                 "python -I -S -c pass", None)  # fmt: skip
        above = above_floor.margin * 1000
        self.rows.append(
            ("read, above the floor", f"{above:+.1f} ms", f"{above_floor.medians[1] * 1000:.1f} "
             "ms (python -I -S -c pass)", "", f"≤ 3 ms{' ✓' if above <= 3 else ' ✗'}")
        )  # fmt: skip
        for what, command in (
            ("python -I -S -c pass", bare),
            ("python -c pass", Command([sys.executable, "-c", "pass"])),
            ("python -c 'import msgspec'", Command([sys.executable, "-c", "import msgspec"])),
        ):
            floor_row = self.compare(f"floor: {what}", command, get, "etcdctl get", None)
            if what in self.gauged:  # the bare start, in a row of its own
                self.gauged[what].append(floor_row.ours)
        memory = (("read", read), ("write", write), ("verbs", verbs))
        return {what: peak_memory_kib(command) for what, command in memory}

    def many_nodes(self, counts: list[int]) -> dict[str, int | None]:
        rss = {}
        for count in counts:
            prefix = f"{PREFIX}-fleet-{count}"
            names = self.seed_upstream_heads(prefix, count)
            request = {
                "nodenames": names,
                "workload_resource": {"prod_count_map": {PRODUCT: 1}},
            }
            config = self.config_for(prefix)
            self.warm_up(config)
            answer = self.answer("get-nodes-deploy-capacity", request, config)
            fits = {e["Capacity"] for e in answer["nodes_deploy_capacity_map"].values()}
            assert fits == {SEEDED_FITS}, f"each node should fit {SEEDED_FITS}: {fits}"
            capacity = self.call("get-nodes-deploy-capacity", request, config)
            scan = self.ctl("get", "--prefix", KeyLayout(prefix, "gpu").root.decode())
            goal = 1.8 if count >= 10_000 else 1.3
            self.compare(f"get-nodes-deploy-capacity, {count:,} nodes", capacity, scan,
                         "etcdctl get --prefix, same records", goal)  # fmt: skip
            rss[f"{count:,} nodes"] = peak_memory_kib(capacity)
            if count >= 10_000:
                listed = Command(["resource-gpu", "--config", str(config), "nodes", "--json"])
                self.compare(f"nodes --json, {count:,} nodes", listed, scan,
                             "etcdctl get --prefix, same records", None)  # fmt: skip
                rss[f"nodes, {count:,} nodes"] = peak_memory_kib(listed)
        return rss

    def fleet(self, count: int) -> dict[str, int | None]:
        """The largest fleet: one call must finish inside core's 30 s call timeout."""
        prefix = f"{PREFIX}-fleet-{count}"
        names = self.seed_upstream_heads(prefix, count)
        request = {"nodenames": names, "workload_resource": {"prod_count_map": {PRODUCT: 1}}}
        config = self.config_for(prefix)
        self.warm_up(config)
        capacity = self.call("get-nodes-deploy-capacity", request, config)
        scan = self.ctl("get", "--prefix", KeyLayout(prefix, "gpu").root.decode())
        ours, theirs = side_by_side(3, capacity, scan)
        self.limit_row(f"get-nodes-deploy-capacity, {count:,} nodes", Pair(ours, theirs),
                       "etcdctl get --prefix, same records", 30)  # fmt: skip
        return {f"{count:,} nodes": peak_memory_kib(capacity)}

    def long_stream(self, length: int) -> None:
        """A write's cost against its stream's length: bounds off, so that the stream stays
        long (bounded, it would be compacted once its events are streams.min_age old). Each
        takes a card and gives it back, in turns with the same on a 10-event stream."""
        self.seed_stream("long", length)
        config = self.config_for(PREFIX, unbounded=True)
        self.warm_up(config)
        take = {
            "nodename": "long",
            "resource_request": {"prod_count_map": {PRODUCT: 1}},
            "delta": True,
            "incr": True,
        }
        give = {**take, "incr": False}
        short, short_give = {**take, "nodename": "short"}, {**give, "nodename": "short"}
        calls = [
            self.call("set-node-resource-usage", request, config)
            for request in (take, give, short, short_give)
        ]
        taken, given, short_taken, short_given = side_by_side(self.repeat, *calls)
        ours = [(take + give) / 2 for take, give in zip(taken, given, strict=True)]
        base = [(take + give) / 2 for take, give in zip(short_taken, short_given, strict=True)]
        self.row(f"write on a {length:,}-event stream", Pair(ours, base), "same, 10-event stream",
                 1.1)  # fmt: skip

    def contention(self, seconds: float, writers: int = WRITERS) -> str:
        """``writers`` processes writing to one node for ``seconds``: commits, calls that gave
        up (the goal: none, while each call has time left), compare-and-swap retries."""
        # Enough cards in use that giving one back never fails: every call can commit.
        info = {"nodename": "hot", "capacity": {"prod_count_map": {PRODUCT: 100_000}},
                "usage": {"prod_count_map": {PRODUCT: 50_000}}}  # fmt: skip
        verb = ["resource-gpu", "--config", str(self.config)]
        run([*verb, "set-node-resource-info"], json.dumps(info).encode())
        argv = [*verb, "set-node-resource-usage"]
        results: list[int] = []
        failures: list[str] = []
        stop = time.monotonic() + seconds

        def writer(index: int) -> None:
            incr = index % 2 == 0
            while time.monotonic() < stop:
                request = {
                    "nodename": "hot",
                    "resource_request": {"prod_count_map": {PRODUCT: 1}},
                    "delta": True,
                    "incr": incr,
                }
                done = run(argv, json.dumps(request).encode())
                results.append(done.status)
                if done.status:
                    failures.append(done.stderr.decode().strip())
                incr = not incr

        before = self.proposals()
        started = time.perf_counter()
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        commits = results.count(0)
        txns = self.proposals() - before
        retries = max(txns - commits, 0)
        gave_up = len(results) - commits
        return (
            f"{writers} writers on one node for {elapsed:.1f} s: {commits} commits "
            f"({commits / elapsed:.1f}/s), {gave_up} calls gave up "
            f"{'✓' if gave_up == 0 else '✗'} (goal: none), {retries} compare-and-swap "
            f"retries ({retries / max(commits, 1):.2f} per commit)"
            + (f"; the first said: {failures[0]}" if failures else "")
        )

    def concurrent(self, callers: int, rounds: int) -> str:
        """``callers`` reads started at once, ``rounds`` times, through one helper: the p99 of
        their times against one read's median; and, for the floor, as many bare interpreters
        started as the launcher starts one (``python -I -S -c pass``) at once, their rounds in
        turns with the reads': the goal is a p99 within 1.3x theirs (3x a lone read cannot be
        met on two cores). On two cores a burst waits for CPU, so the CPU each read cost is
        said too, where it went: the calls' own processes, the helper with its call
        processes, and etcd."""
        read = self.call("get-node-resource-info", {"nodename": "short"})
        bare = Command([sys.executable, "-I", "-S", "-c", "pass"])
        alone = statistics.median(*side_by_side(self.repeat, read))
        helper = self.helper_pid()
        ours, theirs = at_once(callers, rounds, [read, bare], lambda: self.cpu_spent(helper))
        calls = callers * rounds
        cpu = [spent / calls for spent in ours.cpu]
        floor = theirs.cpu[0] / calls
        p99 = Pair(ours.p99s, theirs.p99s).ratio  # the rounds' own, each beside its floor's
        verdict = "✓" if p99 <= 1.3 else "✗"
        return (
            f"{callers} reads at once through one helper (median of {rounds} rounds): median "
            f"{ours.median * 1000:.0f} ms, p99 {ours.p99 * 1000:.0f} ms, one read alone "
            f"{alone * 1000:.1f} ms ({ours.p99 / alone:.1f}x); {callers} bare interpreters at "
            f"once (python -I -S -c pass), in turns with them: p99 {theirs.p99 * 1000:.0f} ms: "
            f"ours {p99:.2f}x theirs, round by round {verdict} (goal ≤ 1.3x). CPU a read: its "
            f"process {cpu[0] * 1000:.2f} ms (a bare interpreter's {floor * 1000:.2f}), the helper "
            f"{cpu[1] * 1000:.2f} ms, etcd {cpu[2] * 1000:.2f} ms: {sum(cpu) / floor:.2f}x a "
            "bare interpreter's"
        )

    def helper_pid(self) -> int | None:
        """The pid of the resident helper serving the main config, if one does."""
        argv = ["resource-gpu", "--config", str(self.config), "helper", "--json"]
        shown = subprocess.run(argv, capture_output=True, check=False)
        if shown.returncode != 0:
            return None
        [helper] = json.loads(shown.stdout)
        pid: int = helper["pid"]
        return pid

    def cpu_spent(self, helper: int | None) -> tuple[float, float, float]:
        """CPU seconds so far: of this process's children that have exited (the calls and
        interpreters it started), of the helper with its call processes (those gone counted
        by the helper that reaped them), and of etcd (its own metric)."""
        import resource

        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        mine = children.ru_utime + children.ru_stime
        return mine, self._helper_cpu(helper) if helper else 0.0, self._etcd_cpu()

    def _helper_cpu(self, helper: int) -> float:
        ticks = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry) == helper:  # its own, and its reaped call processes'
                ticks += sum(int(field) for field in fields[11:15])
            elif int(fields[1]) == helper:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def _etcd_cpu(self) -> float:
        return self.metric("process_cpu_seconds_total")

    def proposals(self) -> int:
        """Write transactions etcd has applied (a lost compare-and-swap is one too)."""
        return int(self.metric("etcd_server_proposals_applied_total"))

    def metric(self, name: str) -> float:
        """One of etcd's own metrics (``/metrics``), as it stands now."""
        with urllib.request.urlopen(f"{self.endpoint}/metrics", timeout=5) as page:
            for line in page.read().decode().splitlines():
                if line.startswith(f"{name} "):
                    return float(line.split()[1])
        raise RuntimeError(f"etcd /metrics has no {name}")


@contextmanager
def benched(transport: str, resident: bool, repeat: int) -> Iterator[Bench]:
    """A throwaway etcd and a Bench on it. The helpers (one per config) live in a runtime
    directory of the bench's own, and are stopped with it: nothing is left running, nothing of
    the user's is touched."""
    with throwaway_etcd() as (endpoint, directory):
        yield Bench(endpoint, directory, transport, resident, repeat)
