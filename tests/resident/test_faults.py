"""A helper, or one call in it, that dies, stops or falls silent: calls go on in-process, the
silent process is killed (a call's alone, the helper goes on serving), and no write is ever
applied twice or lost. Faulty helpers are real helpers in processes of their own
(tests/resident/fake_helper.py); "stopped" is SIGSTOP, as a debugger or a hung host does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from resource_extend.commands.resident import client as resident
from tests.etcdkv import Etcd
from tests.plugin import Plugin, counts
from tests.resident.conftest import (
    ROOT,
    TAKE,
    Fake,
    G,
    alive,
    call_processes,
    helper_pid,
    own_dir,
    resident_plugin,
    started,
    wait_for,
)

TIMEOUT = 1
"""etcd.timeout in these tests."""
STUCK_AFTER = resident.SILENCE
"""A call whose process says nothing for this long is stuck, however long it has run."""
SLACK = 5.0
"""What a call may take beyond the wait for a stuck helper: its own run in-process."""

FakeStarter = Callable[[str, Plugin], Fake]


def seeded(plugin: Plugin) -> None:
    """Node n1 with 8 cards, added with the helper off (none is starting), then on."""
    resident_plugin(plugin, on=False)
    plugin.add("n1", {G: 8})
    resident_plugin(plugin, timeout=TIMEOUT)


def timed(plugin: Plugin, verb: str, request: object) -> tuple[float, Any]:
    began = time.monotonic()
    answer = plugin.ok(verb, request)
    return time.monotonic() - began, answer


def kinds(etcd: Etcd) -> list[str]:
    return [event["change"]["kind"] for event in etcd.event_docs("n1")]


def test_a_write_whose_helper_died_after_writing_is_not_applied_twice(
    plugin: Plugin, etcd: Etcd, fake: FakeStarter
) -> None:
    seeded(plugin)
    fake("dies-before-answering", plugin)
    answer = plugin.ok("set-node-resource-usage", TAKE)  # resumed in-process: found, not redone
    assert counts(answer["before"]) == {} and counts(answer["after"]) == {G: 1}
    assert kinds(etcd) == ["node_added", "usage_changed"]


def test_a_read_whose_helper_died_runs_again_in_process(plugin: Plugin, fake: FakeStarter) -> None:
    seeded(plugin)
    fake("dies-before-answering", plugin)
    assert counts(plugin.info("n1")["capacity"]) == {G: 8}


def test_a_stopped_helper_is_replaced_and_calls_go_on(
    plugin: Plugin, runtime: Path, etcd: Etcd
) -> None:
    """The helper stopped with its call processes (a frozen host, ``kill -STOP`` of its
    group): a call waits ``SILENCE`` for one to take it, then kills them all, and runs itself;
    none is left holding the helper's socket, and the next helper serves."""
    resident_plugin(plugin, timeout=TIMEOUT)
    stopped = started(plugin)
    group = [stopped, *call_processes(stopped)]
    os.killpg(stopped, signal.SIGSTOP)
    try:
        took, answer = timed(plugin, "get-node-resource-info", {"nodename": "n1"})
        assert counts(answer["capacity"]) == {G: 8}
        assert took < resident.SILENCE + SLACK
        assert not any(alive(pid) for pid in group), "the stopped helper was not replaced"
        wait_for(lambda: helper_pid(plugin) not in (None, stopped), "a new helper")
        took, answer = timed(plugin, "set-node-resource-usage", TAKE)
        assert counts(answer["after"]) == {G: 1}
    finally:
        for pid in group:
            if alive(pid):  # the test failed: leave nothing stopped behind
                os.kill(pid, signal.SIGKILL)
    assert kinds(etcd) == ["node_added", "usage_changed"]


def test_a_call_process_waiting_takes_calls_while_the_helper_itself_is_stopped(
    plugin: Plugin, runtime: Path, etcd: Etcd
) -> None:
    """Call processes wait on the helper's socket themselves: the helper's own process,
    stopped, holds up no call (had a call waited for it, it would have killed the helper)."""
    resident_plugin(plugin, timeout=TIMEOUT)
    helper = started(plugin)
    call_processes(helper)
    os.kill(helper, signal.SIGSTOP)
    try:
        assert counts(plugin.info("n1")["capacity"]) == {G: 8}
        assert counts(plugin.ok("set-node-resource-usage", TAKE)["after"]) == {G: 1}
        assert alive(helper) and helper_pid(plugin) == helper
    finally:
        os.kill(helper, signal.SIGCONT)
    assert kinds(etcd) == ["node_added", "usage_changed"]


def test_a_helper_stuck_after_its_write_went_out_is_resumed_not_repeated(
    plugin: Plugin, etcd: Etcd, fake: FakeStarter
) -> None:
    seeded(plugin)
    faulty = fake("hangs-after-writing", plugin)
    took, answer = timed(plugin, "set-node-resource-usage", TAKE)
    assert counts(answer["before"]) == {} and counts(answer["after"]) == {G: 1}
    assert STUCK_AFTER <= took < STUCK_AFTER + SLACK
    assert alive(faulty.process.pid), "the helper was killed, not the stuck call alone"
    assert kinds(etcd) == ["node_added", "usage_changed"]


def test_a_helper_stuck_before_sending_its_write_never_sends_it(
    plugin: Plugin, etcd: Etcd, fake: FakeStarter
) -> None:
    seeded(plugin)
    faulty = fake("hangs-before-writing", plugin)
    took, answer = timed(plugin, "set-node-resource-usage", TAKE)
    assert counts(answer["after"]) == {G: 1}
    assert STUCK_AFTER <= took < STUCK_AFTER + SLACK
    assert alive(faulty.process.pid), "the helper was killed, not the stuck call alone"
    time.sleep(0.5)  # had the call been left alive, its write might land now
    assert kinds(etcd) == ["node_added", "usage_changed"]
    assert counts(plugin.info("n1")["usage"]) == {G: 1}


BACKLOG_FULL = """
import os, socket, sys, time
listener = socket.socket(socket.AF_UNIX)
os.umask(0o177)
listener.bind(sys.argv[1])
listener.listen(0)
filler = socket.socket(socket.AF_UNIX)
filler.connect(sys.argv[1])  # the only place in the backlog, taken: connect() now blocks
print("ready", flush=True)
time.sleep(120)
"""


def test_a_helper_whose_backlog_is_full_does_not_hang_a_call(plugin: Plugin, runtime: Path) -> None:
    seeded(plugin)
    own_dir(runtime).mkdir(mode=0o700, exist_ok=True)  # parsed copies may be there
    path = own_dir(runtime) / resident.socket_name(str(plugin.config))
    listener = subprocess.Popen(
        [sys.executable, "-c", BACKLOG_FULL, str(path)], stdout=subprocess.PIPE, cwd=ROOT
    )
    try:
        assert listener.stdout is not None and listener.stdout.readline() == b"ready\n"
        took, answer = timed(plugin, "get-node-resource-info", {"nodename": "n1"})
        assert counts(answer["capacity"]) == {G: 8}
        assert took < resident.CONNECT_TIMEOUT + SLACK
    finally:
        listener.kill()
        listener.wait()


def test_the_helper_sends_no_write_its_caller_did_not_allow(
    plugin: Plugin, runtime: Path, etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller that gave up on the helper (it timed out, or was killed by core) must never
    find its write made behind its back: the helper waits for the go-ahead (``G``) after it
    announces a write, and a caller that hung up instead gets nothing written."""
    resident_plugin(plugin, timeout=TIMEOUT)
    started(plugin)
    monkeypatch.setenv("HOME", str(plugin.workdir / "home"))  # a caller such as its starter
    for give_up in (b"", b"N\n"):  # hang up; or answer anything but the go-ahead
        link = resident.Link.connect(plugin.program, resident.socket_name(str(plugin.config)))
        assert link is not None
        request = json.dumps(TAKE).encode()
        code = resident.installation()
        link.sock.settimeout(10)
        link.sock.sendall(
            resident.call_request("set-node-resource-usage", str(plugin.config), code, request)
        )
        assert link.reader.line() is not None  # A: taken
        announced = link.reader.line()
        assert announced is not None and announced.startswith(b"P "), announced
        if give_up:
            link.sock.sendall(give_up)
        else:
            link.close()
        time.sleep(0.5)
        if give_up:
            link.close()
    assert kinds(etcd) == ["node_added"], "a write went out that its caller had not allowed"
    assert counts(plugin.info("n1")["usage"]) == {}
