"""32 processes deploying and releasing on one node while a compactor runs: under that load a
write goes out only with time left to hear its answer, or to settle it by its op id, so every
call that answered knows what it did. None reports a lost or unknown outcome, each failure is
contention with nothing written, and the node's usage is exactly what the calls answered
success for: no workload leaked, none doubled (``docs/guarantees.md``)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from resource_extend.projections.storage.node import STORAGE
from tests.etcdkv import Etcd
from tests.plugin import Plugin, failure_line

WRITERS = 32
ROUNDS = 4
"""Each writer deploys a workload and releases it, at least ROUNDS times (256 writes in all),
and goes on until the compactor has cut the stream under their load."""
NODE = "busy"
REQUEST = {"volumes-request": ["AUTO:/data:rw:1M"], "volumes-limit": ["AUTO:/data:rw:1M"]}
MIN_AGE = 8
"""The compactor's ``--min-age``: past any call's time under this load (etcd.timeout, 5 s)."""
LONGEST = 90.0
"""Seconds the writers go on at most, waiting for a cut."""


def usage_call(storage: Plugin, workload: dict[str, Any], incr: bool) -> tuple[bool, str]:
    """Whether the call answered success; its failure line, if not."""
    request = {"nodename": NODE, "workloads_resource": [workload], "delta": True, "incr": incr}
    result = storage.run("set-node-resource-usage", request)
    if result.status == 0:
        return True, ""
    return False, failure_line(result, "set-node-resource-usage", "resource-storage")


def writer(
    storage: Plugin, workload: dict[str, Any], start: threading.Barrier, cut: threading.Event
) -> list[int | str]:
    """What each of its calls answered: +1 or -1 for a success, else its failure line."""
    start.wait()
    answered: list[int | str] = []
    began, rounds = time.monotonic(), 0
    while rounds < ROUNDS or not (cut.is_set() or time.monotonic() - began > LONGEST):
        rounds += 1
        for incr in (True, False):
            ok, line = usage_call(storage, workload, incr)
            answered.append((1 if incr else -1) if ok else line)
            if not ok and incr:
                break  # nothing deployed: nothing to release
    return answered


def compactor(
    storage: Plugin, exports: Path, stop: threading.Event, cut: threading.Event
) -> list[str]:
    failures = []
    while not stop.wait(0.5):
        args = (NODE, "--keep", "5", "--min-age", str(MIN_AGE), "--export-dir", str(exports))
        done = storage.run("compact", None, *args)
        if done.status != 0:
            failures.append(done.stderr)
        if len(list(exports.iterdir())) >= 2:
            cut.set()
    return failures


def test_under_32_writers_and_a_compactor_every_answered_write_is_known(
    storage: Plugin, tmp_path: Path
) -> None:
    storage.ok("add-node", {"nodename": NODE, "resource": {"volumes": ["/data0:1T"]}})
    planned = storage.ok(
        "calculate-deploy",
        {"nodename": NODE, "deploy_count": 1, "workload_resource_request": REQUEST},
    )
    workload = planned["workloads_resource"][0]
    exports = tmp_path / "exports"
    exports.mkdir()
    start, stop, cut = threading.Barrier(WRITERS), threading.Event(), threading.Event()
    with ThreadPoolExecutor(WRITERS + 1) as pool:
        compacting = pool.submit(compactor, storage, exports, stop, cut)
        runs = [pool.submit(writer, storage, workload, start, cut) for _ in range(WRITERS)]
        answers = [item for run in runs for item in run.result()]
        stop.set()
    assert compacting.result() == [], "the compactor failed"
    assert cut.is_set(), "the compactor never cut twice: the load went untested with it"

    lines = [item for item in answers if isinstance(item, str)]
    assert [line for line in lines if "contention" not in line] == []
    held = sum(item for item in answers if isinstance(item, int))
    successes = sum(1 for item in answers if isinstance(item, int))

    info = storage.ok("get-node-resource-info", {"nodename": NODE})
    assert info["usage"]["volumes"]["/data0"] == held * workload["storage_request"]
    etcd = Etcd(storage.endpoints, storage.prefix, "storage")
    try:
        head = etcd.head(NODE)
    finally:
        etcd.close()
    assert head is not None
    assert STORAGE.read_head(head.value).seq == 1 + successes, "a write landed unanswered"
