"""A call process of the resident helper serves calls in turn, saying it is free after each,
and leaves after its share: ``RETIRE_AFTER`` calls, a growth of ``RETIRE_GROWTH``, or the
helper gone. Its loop runs here, in this process, with the helper's end of its pair in the
test's hands (the calls themselves, through a real helper: tests/resident)."""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.resident import arbiter, call_process
from resource_extend.commands.resident.arbiter import Helper
from resource_extend.commands.resident.call_process import CallProcess


class Pair:
    """The helper's end of a call process's pair, and what the process served."""

    def __init__(self) -> None:
        self.helper, self.process = socket.socketpair()
        self.served: list[bytes] = []

    def hand_over(self, calls: int) -> None:
        for number in range(calls):
            ours, theirs = socket.socketpair()
            ours.sendall(b"call %d" % number)
            assert arbiter.Worker(0, self.helper).take(theirs, [], number)
            ours.close()
            theirs.close()

    def said(self) -> bytes:
        self.helper.setblocking(False)
        try:
            return self.helper.recv(64)
        except BlockingIOError:
            return b""


@pytest.fixture
def helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Helper]:
    directory = os.open(tmp_path, os.O_RDONLY)
    with socket.socket(socket.AF_UNIX) as listener:
        made = arbiter.Helper(
            GPU, listener, directory, "x.sock", 0, str(tmp_path / "gpu.yaml"), "x.sock"
        )
        yield made
    os.close(directory)


@pytest.fixture
def loop(helper: Helper) -> CallProcess:
    """A call process of the helper, its loop run in this process."""
    return CallProcess(helper)


@pytest.fixture
def pair(loop: CallProcess, monkeypatch: pytest.MonkeyPatch) -> Pair:
    made = Pair()

    def serve(call: socket.socket) -> None:
        with call:
            made.served.append(call.recv(64))

    monkeypatch.setattr(loop, "_serve_call", serve)
    return made


def test_it_serves_calls_in_turn_saying_it_is_free_after_each_but_its_last(
    loop: CallProcess, pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(call_process, "RETIRE_AFTER", 3)
    pair.hand_over(4)
    loop.work(pair.process, None)
    assert pair.served == [b"call 0", b"call 1", b"call 2"]
    assert pair.said() == call_process.FREE * 2  # the third was its last: it leaves


def test_it_serves_the_call_it_was_forked_for_first(
    loop: CallProcess, pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(call_process, "RETIRE_AFTER", 2)
    first, theirs = socket.socketpair()
    theirs.sendall(b"first")
    pair.hand_over(1)
    loop.work(pair.process, first)
    assert pair.served == [b"first", b"call 0"]
    assert pair.said() == call_process.FREE


def test_it_leaves_after_a_call_that_grew_it(
    loop: CallProcess, pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept: list[bytes] = []

    def serve(call: socket.socket) -> None:
        with call:
            pair.served.append(call.recv(64))
            kept.append(b"x" * (call_process.RETIRE_GROWTH + (8 << 20)))  # written: resident

    monkeypatch.setattr(loop, "_serve_call", serve)
    pair.hand_over(2)
    loop.work(pair.process, None)
    assert pair.served == [b"call 0"]
    assert pair.said() == b""


def test_it_leaves_when_the_helper_is_gone(loop: CallProcess, pair: Pair) -> None:
    pair.hand_over(1)
    pair.helper.close()
    loop.work(pair.process, None)  # the call handed over is served; then none comes
    assert pair.served == [b"call 0"]


def test_the_helper_keeps_one_idle_process_and_any_that_took_a_call_lately(
    helper: Helper,
) -> None:
    """Idle call processes that have waited ``KEEP_IDLE`` seconds leave, but one; the one
    that served last (handed the next call) is kept."""
    now = time.monotonic()
    processes = [subprocess.Popen(["sleep", "60"]) for _ in range(4)]
    idle = []
    for process, waited in zip(processes, (90, 70, 30, 10), strict=True):
        worker = arbiter.Worker(process.pid, socket.socketpair()[0])
        worker.free_since = now - waited
        helper._selector.register(worker.pair, selectors.EVENT_READ, worker)
        idle.append(worker)
    helper._idle = list(idle)
    helper._trim()
    assert helper._idle == idle[2:]  # the two that waited longest, stacked deepest, left
    assert [process.poll() is None for process in processes] == [False, False, True, True]
    for process in processes[2:]:
        process.kill()
        process.wait()


def test_the_last_idle_process_is_kept_however_long_it_waits(helper: Helper) -> None:
    process = subprocess.Popen(["sleep", "60"])
    worker = arbiter.Worker(process.pid, socket.socketpair()[0])
    worker.free_since = time.monotonic() - 10 * arbiter.KEEP_IDLE
    helper._selector.register(worker.pair, selectors.EVENT_READ, worker)
    helper._idle = [worker]
    helper._trim()
    assert helper._idle == [worker] and process.poll() is None
    process.kill()
    process.wait()
