"""Calls through the helper run side by side, each in a call process of its own: a slow one
is waited for as long as it keeps beating (killed for silence, never for taking long), and runs
once, in the helper; a fast call made meanwhile answers while it runs; a call that falls silent
is killed alone, and the helper goes on serving. Calls one after another are served by the
processes waiting for them, with no fork."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from resource_extend.commands.resident import client as resident
from tests.faults import SlowLink
from tests.plugin import Plugin, Result, counts
from tests.resident.conftest import (
    TAKE,
    G,
    alive,
    call_processes,
    children,
    helper_pid,
    resident_plugin,
    started,
    wait_for,
)

SLOW = 8.0
"""Seconds etcd's answer to the slow call is held back: well past ``resident.SILENCE`` (3 s)
and the 3 s a helper has to take a call, so a call killed for taking long would show."""
INFO = {"nodename": "n1"}


@pytest.fixture
def slow_link(plugin: Plugin, runtime: Path) -> Iterator[SlowLink]:
    """Node n1 with 8 cards; then the helper on, reaching etcd through a link that can be
    slowed, with an etcd.timeout past the slow answer; the helper started, and a call served
    (the next goes to the process that served it: its second call beats as its first did)."""
    resident_plugin(plugin, on=False)
    plugin.add("n1", {G: 8})
    link = SlowLink(plugin.endpoints[0], SLOW)
    resident_plugin(plugin, machines=[link.url], timeout=SLOW + 5)
    plugin.info("n1")  # in-process: it starts the helper
    wait_for(lambda: helper_pid(plugin), "the helper to answer")
    plugin.info("n1")
    time.sleep(2 * resident.HEARTBEAT)  # its heartbeat's thread now ticks between calls
    yield link
    link.close()


def in_background(
    plugin: Plugin, verb: str, request: object
) -> tuple[threading.Thread, list[Result]]:
    done: list[Result] = []
    thread = threading.Thread(target=lambda: done.append(plugin.run(verb, request)))
    thread.start()
    return thread, done


def test_a_slow_read_runs_once_in_the_helper_while_a_fast_call_answers(
    plugin: Plugin, slow_link: SlowLink
) -> None:
    helper = helper_pid(plugin)
    slow_link.slow_down(1)
    began = time.monotonic()
    slow, slow_done = in_background(plugin, "get-node-resource-info", INFO)
    assert slow_link.slowed.wait(10), "the slow call never reached etcd"

    fast = plugin.ok("set-node-resource-usage", TAKE)  # a write, made meanwhile
    assert counts(fast["after"]) == {G: 1}
    assert not slow_done, "the fast call waited for the slow one"

    slow.join(SLOW + 20)
    took = time.monotonic() - began
    [answer] = slow_done
    assert (answer.status, answer.stderr) == (0, ""), answer.stderr
    assert counts(answer.answer["capacity"]) == {G: 8}
    assert took >= SLOW  # it did wait for etcd's answer ...
    assert slow_link.connections == 2, "the slow call ran again in-process"  # ... once
    assert helper_pid(plugin) == helper and helper is not None and alive(helper)


def test_a_call_that_falls_silent_is_killed_alone_and_the_helper_serves_on(
    plugin: Plugin, slow_link: SlowLink
) -> None:
    """SIGSTOP on the process running a slow call (a debugger, say): it beats no more, so the
    client kills it once it has been silent for ``resident.SILENCE`` and runs the call itself;
    the helper, and a call it serves meanwhile, go on."""
    helper = helper_pid(plugin)
    assert helper is not None
    slow_link.slow_down(1)
    slow, slow_done = in_background(plugin, "get-node-resource-info", INFO)
    assert slow_link.slowed.wait(10)
    wait_for(lambda: _calls(helper), "the call's process")
    [call] = _calls(helper)
    os.kill(call, signal.SIGSTOP)
    try:
        assert counts(plugin.ok("get-node-resource-info", INFO)["capacity"]) == {G: 8}
        slow.join(SLOW + 20)  # (a bound for a hung test, not a budget: stopped, the call's
        # process can never answer, so an answer is the client's own, run in-process)
        [answer] = slow_done
        assert (answer.status, answer.stderr) == (0, ""), answer.stderr
        assert not alive(call), "the silent call was not killed"
        assert alive(helper) and helper_pid(plugin) == helper
    finally:
        if alive(call):
            os.kill(call, signal.SIGKILL)
    assert resident.SILENCE < SLOW


def test_a_call_is_taken_by_a_process_waiting_before_it_came(
    plugin: Plugin, slow_link: SlowLink
) -> None:
    """The helper keeps a call process waiting for the next call (the first forked ahead of
    it), so a call never waits for a fork; once it is taken, another waits for the next."""
    helper = helper_pid(plugin)
    assert helper is not None
    waiting = call_processes(helper)
    assert not _calls(helper)
    slow_link.slow_down(1)
    slow, slow_done = in_background(plugin, "get-node-resource-info", INFO)
    assert slow_link.slowed.wait(10)
    wait_for(lambda: _calls(helper), "the call's process")
    [call] = _calls(helper)
    assert call in waiting
    wait_for(lambda: set(children(helper)) - {call}, "a process waiting for the next call")
    slow.join(SLOW + 20)
    [answer] = slow_done
    assert (answer.status, answer.stderr) == (0, ""), answer.stderr


def test_calls_in_turn_are_served_by_the_processes_waiting_and_fork_none(
    plugin: Plugin, runtime: Path
) -> None:
    """A call process, its call answered, waits for the next: calls one after another are
    served without a fork (after its first call, a process copies none of the helper's pages
    again)."""
    resident_plugin(plugin)
    helper = started(plugin)
    plugin.info("n1")
    waiting = call_processes(helper)
    before = _served(plugin)
    for _ in range(5):
        assert counts(plugin.ok("get-node-resource-info", INFO)["capacity"]) == {G: 8}
    assert _served(plugin) == before + 6  # the five, and the first count's own call
    assert call_processes(helper) == waiting


def _served(plugin: Plugin) -> int:
    shown = plugin.run("helper", None, "--json")
    assert shown.status == 0, shown.stderr
    [status] = json.loads(shown.stdout)
    served: int = status["calls_served"]
    return served


def _calls(helper: int) -> list[int]:
    """The helper's call processes running a call: those holding a caller's connection besides
    their pair with the helper and the helper's socket, which each waits on (Unix sockets all:
    the etcd connections a process keeps from call to call are TCP)."""
    return [pid for pid in children(helper) if _unix_sockets(pid) > 2]


def _unix_sockets(pid: int) -> int:
    with open("/proc/net/unix") as table:
        unix = {line.split()[6] for line in table.readlines()[1:] if len(line.split()) > 6}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    held = 0
    for fd in fds:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            held += link.startswith("socket:[") and link[8:-1] in unix
    return held
