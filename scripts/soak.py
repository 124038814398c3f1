"""The soak: many writes over many nodes under the default stream policy, with the archiver
running, against a throwaway etcd; etcd's database size as it goes.

Run by ``scripts/bench --soak`` (which installs everything first). Writes go through the verb
``set-node-resource-usage`` in this process (the same code core's calls run, without a process
start each, so the run fits in minutes), a card taken or given back by each. The first half of
the writes runs with no etcd compaction at all, the second with etcd compacting its revision
history every ``STEP`` writes (as ``--auto-compaction-mode=revision`` does; fewer for a short
run). Prints Markdown: the database's size every step, then the totals, and fails unless
``verify --all`` is clean and the archive plus the streams hold every event written, once.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.protocol import CallIO, Session
from resource_extend.commands.registry import load_verb
from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store import Store
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.ledger.upkeep import export
from resource_extend.ledger.upkeep.footprint import etcd_footprint, measure
from tests.etcd_server import Cluster, etcdctl_binary

PRODUCT = "nvidia-3090"
PREFIX = "/soak"
WRITERS = 4
STEP = 10_000
"""Writes between two samples of etcd's size, and between two etcd compactions (phase two)."""


def step_of(writes: int) -> int:
    """``STEP``, or for a short run a twentieth of it, so that it still has a curve."""
    return min(STEP, max(writes // 20, 1))


ARCHIVE_EVERY = 5
"""Seconds between archiver passes."""


@dataclass
class Sample:
    writes: int
    seconds: float
    db_size: int
    in_use: int | None
    live_events: int


@dataclass
class Soak:
    workdir: Path
    endpoint: str
    nodes: int
    writes: int
    min_age: float
    samples: list[Sample] = field(default_factory=list)
    done: int = 0
    failures: list[str] = field(default_factory=list)
    passes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def config(self) -> Path:
        return self.workdir / "gpu.yaml"

    @property
    def archive(self) -> Path:
        return self.workdir / "archive"

    def write_config(self) -> None:
        config = {
            "etcd": {"machines": [self.endpoint], "prefix": PREFIX},
            "streams": {"archive_dir": str(self.archive), "min_age": self.min_age},
            "resident": False,
        }
        self.config.write_text(json.dumps(config))  # JSON is YAML; every other bound: default

    def call(self, verb: str, request: dict[str, Any]) -> None:
        """One verb, in this process, as core's call runs it."""
        streams = CallIO(io.BytesIO(json.dumps(request).encode()), io.BytesIO(), io.BytesIO())
        try:
            found = load_verb(GPU, verb)
            assert found is not None, verb
            found(Session(GPU, str(self.config), streams))
        except SystemExit:
            stderr = streams.stderr
            assert isinstance(stderr, io.BytesIO)
            with self.lock:
                self.failures.append(stderr.getvalue().decode().strip())


def _writer(soak: Soak, index: int, each: Callable[[int], None]) -> None:
    try:
        _write(soak, index, each)
    except Exception as exc:  # a writer that dies fails the soak, by name
        with soak.lock:
            soak.failures.append(f"writer {index}: {type(exc).__name__}: {exc}")


def _write(soak: Soak, index: int, each: Callable[[int], None]) -> None:
    for number in range(index, soak.writes, WRITERS):
        node = f"node-{number % soak.nodes:04d}"
        take = (number // soak.nodes) % 2 == 0  # a card taken, then given back next round
        request = {
            "nodename": node,
            "workloads_resource": [{"prod_count_map": {PRODUCT: 1}}],
            "delta": True,
            "incr": take,
        }
        soak.call("set-node-resource-usage", request)
        each(number)
        if soak.failures:
            return


def _archiver(soak: Soak) -> subprocess.Popen[bytes]:
    """``resource-gpu archive --every``, in its own process, as an operator runs it."""
    argv = ["resource-gpu", "--config", str(soak.config), "archive", "--every", str(ARCHIVE_EVERY)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def run_soak(workdir: Path, nodes: int, writes: int, min_age: float) -> None:
    cluster = Cluster(1, ["--quota-backend-bytes", str(8 << 30)]).start()
    try:
        soak = Soak(workdir, cluster.endpoints[0], nodes, writes, min_age)
        soak.write_config()
        soak.archive.mkdir(mode=export.DIRECTORY_MODE)
        _soak(soak)
    finally:
        cluster.stop()


def connect(soak: Soak) -> Connection:
    """A connection for one look at etcd (each has ``timeout`` seconds in all)."""
    return Connection(EtcdConfig(machines=[soak.endpoint], timeout=25))


def _soak(soak: Soak) -> None:
    keys = KeyLayout(PREFIX, "gpu")
    for n in range(soak.nodes):
        counts = {PRODUCT: 8}
        soak.call("add-node", {"nodename": f"node-{n:04d}", "resource": {"prod_count_map": counts}})
    start = time.perf_counter()
    etcdctl = [etcdctl_binary(), f"--endpoints={soak.endpoint}"]
    revisions: list[int] = []
    half = soak.writes // 2
    step = step_of(soak.writes)
    progress = threading.Lock()

    def sample() -> None:
        conn = connect(soak)
        footprint = etcd_footprint(conn)
        mine = measure(conn, keys, top=0)
        conn.close()
        soak.samples.append(
            Sample(
                soak.done,
                time.perf_counter() - start,
                footprint.db_size,
                footprint.db_size_in_use,
                mine.event_keys,
            )
        )

    def each(_: int) -> None:
        with progress:
            soak.done += 1
            done = soak.done
            if done % step == 0:
                conn = connect(soak)
                revision = conn.status()[1].header.revision
                conn.close()
                if done > half and revisions:
                    subprocess.run([*etcdctl, "compact", str(revisions[-1])], check=True,
                                   capture_output=True)  # fmt: skip
                revisions.append(revision)
            if done % step == 0:
                sample()

    archiver = _archiver(soak)
    try:
        sample()
        writers = [
            threading.Thread(target=_writer, args=(soak, i, each), daemon=True)
            for i in range(WRITERS)
        ]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        elapsed = time.perf_counter() - start
    finally:  # the archiver stops with the soak, however it ends
        archiver.send_signal(signal.SIGTERM)
        try:
            passes, errors = archiver.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            archiver.kill()
            passes, errors = archiver.communicate()
    soak.passes = len(passes.splitlines()) - 1  # the last line says it stopped
    if archiver.returncode or errors:
        soak.failures += errors.decode().splitlines() or [f"archive exited {archiver.returncode}"]
    if soak.failures:
        raise SystemExit(f"soak: {len(soak.failures)} calls failed; the first: {soak.failures[0]}")
    _report(soak, keys, etcdctl, elapsed)


def _report(soak: Soak, keys: KeyLayout, etcdctl: list[str], elapsed: float) -> None:
    mib = 1 << 20
    print(
        f"## Soak: {soak.writes:,} writes over {soak.nodes:,} nodes, default bounds "
        f"(streams.min_age {soak.min_age:g} s), archiver every {ARCHIVE_EVERY:g} s\n"
    )
    print("| writes | seconds | etcd db | in use | live events | etcd compaction |")
    print("|---|---|---|---|---|---|")
    half = soak.writes // 2
    for s in soak.samples:
        in_use = "?" if s.in_use is None else f"{s.in_use / mib:.1f} MiB"
        compacting = f"every {step_of(soak.writes):,} writes" if s.writes > half else "none"
        print(
            f"| {s.writes:,} | {s.seconds:.0f} | {s.db_size / mib:.1f} MiB | {in_use} "
            f"| {s.live_events:,} | {compacting} |"
        )
    conn = connect(soak)
    mine = measure(conn, keys, top=0)
    per_event = mine.event_bytes / max(mine.event_keys, 1)
    first = next(s for s in soak.samples if s.writes >= half // 2)
    middle = next(s for s in soak.samples if s.writes >= half)
    growth = (middle.db_size - first.db_size) / max(middle.writes - first.writes, 1)
    print(f"\n- {soak.writes / elapsed:.0f} writes/s; {soak.passes} archiver passes")
    print(
        f"- live streams: {mine.event_keys:,} events, {mine.event_bytes / mib:.1f} MiB "
        f"({per_event:.0f} B an event, key and value); heads {mine.head_bytes / mib:.2f} MiB"
    )
    last = soak.samples[-1]
    settled = next(s for s in soak.samples if s.writes >= half + (last.writes - half) // 2)
    compacted = (last.db_size - settled.db_size) / max(last.writes - settled.writes, 1)
    print(
        f"- etcd database growth without etcd compaction: {growth:.0f} B a write, "
        f"{growth * 100_000 / mib:.1f} MiB per 100,000 writes; with it (over the last quarter "
        f"of the writes): {compacted:.0f} B a write, {compacted * 100_000 / mib:.1f} MiB per "
        "100,000 writes"
    )
    subprocess.run([*etcdctl, "compact", str(conn.status()[1].header.revision)], check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run([*etcdctl, "defrag"], check=True, capture_output=True)
    conn.close()
    conn = connect(soak)
    print(f"- after a final compact and defrag: {etcd_footprint(conn).db_size / mib:.1f} MiB")
    conn.close()
    _check(soak)


def _check(soak: Soak) -> None:
    """``verify --all`` is clean, and each node's events 1..N are each in the archive or the
    stream, once."""
    verify = ["resource-gpu", "--config", str(soak.config), "verify", "--all"]
    verified = subprocess.run(verify, capture_output=True, text=True, check=False)
    if verified.returncode != 0:
        found = verified.stdout.strip().splitlines()[:5]
        raise SystemExit(f"soak: verify failed: {verified.stderr.strip()}; {'; '.join(found)}")
    print(f"- verify --all: {verified.stdout.strip().splitlines()[-1]}")
    seen: dict[str, list[int]] = {}
    files = 0
    for path in soak.archive.iterdir():
        files += 1
        node = path.name.split(".")[0]
        for line in path.read_bytes().splitlines():
            event = json.loads(line)
            if event["change"]["kind"] != "checkpoint":
                seen.setdefault(node, []).append(event["seq"])
    archived = sum(len(v) for v in seen.values())
    store = Store(EtcdConfig(machines=[soak.endpoint], prefix=PREFIX, timeout=25), GPU.parts.fold)
    live = 0
    for n in range(soak.nodes):
        node = f"node-{n:04d}"
        for event in store.streams.read_stream(node).events:
            if event.kind != "checkpoint":
                seen.setdefault(node, []).append(event.seq)
                live += 1
    expected = soak.writes + soak.nodes  # each node's add-node, then the writes
    broken = [node for node, seqs in seen.items() if sorted(seqs) != list(range(1, len(seqs) + 1))]
    if broken or archived + live != expected:
        raise SystemExit(
            f"soak: archive incomplete: {archived} archived + {live} live != {expected} written"
            f" ({len(broken)} nodes with missing or repeated events)"
        )
    print(
        f"- archive complete: {archived:,} events in {files:,} files + {live:,} live = "
        f"{expected:,} written ({soak.nodes:,} add-node + {soak.writes:,} writes), each once"
    )
