"""Three members, the first in ``etcd.machines`` stopped (SIGSTOP: it accepts connections and
never answers, as a paused VM or a hung disk does). Two members hold the quorum, so writes go
on: a process that serves many calls starts at the member that answered it last, tries one
that timed out last for a while, and sends a write where its read was answered; a cold call
reads the same hint from the runtime directory.

Round six: every connection started at the first member and gave it a third of
``etcd.timeout``, in warm call processes too; 16 of 25 writes failed in 25 s."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd_server import Cluster
from tests.plugin import Plugin, R, counts
from tests.resident.conftest import G, helper_pid, resident_plugin, wait_for

WRITERS = 4
SECONDS = 12.0
"""How long the writers write while the first member hangs: the load, not a bound."""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = Cluster(3).start()
    yield made
    for member in made.members:
        if member.process is not None:
            os.kill(member.process.pid, signal.SIGCONT)
    made.stop()


def test_writes_go_on_while_the_first_member_hangs(
    cluster: Cluster, tmp_path: Path, runtime: Path
) -> None:
    plugin = resident_plugin(Plugin(cluster.endpoints, tmp_path), timeout=3)
    plugin.add("n1", {G: 1000})
    wait_for(lambda: helper_pid(plugin), "the helper to answer")
    hung = cluster.members[0].process
    assert hung is not None
    os.kill(hung.pid, signal.SIGSTOP)
    failures: list[list[str]] = [[] for _ in range(WRITERS)]
    taken = [0] * WRITERS
    until = time.monotonic() + SECONDS

    def write(writer: int) -> None:
        while time.monotonic() < until:
            take = {"nodename": "n1", "resource": R({G: 1}), "delta": True, "incr": True}
            done = plugin.run("set-node-resource-usage", take, timeout=30)
            if done.status == 0:
                taken[writer] += 1
            else:
                failures[writer].append(done.stderr.strip())

    writers = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    assert all(len(failed) <= 1 for failed in failures), failures
    assert all(landed for landed in taken), taken  # every writer's writes went on
    os.kill(hung.pid, signal.SIGCONT)
    assert counts(plugin.info("n1")["usage"]) == {G: sum(taken)}
    plugin.stop_helper()
