"""A call process of the resident helper takes calls from the helper's socket in turn, telling
the helper of each it takes and each it is done with, and leaves after its share:
``RETIRE_AFTER`` calls, a growth of ``RETIRE_GROWTH``, or the helper hanging up. Its loop runs
here, in this process, with the helper's end of its pair and a listening socket in the test's
hands; the helper's bookkeeping runs here too, fed what call processes say (the calls
themselves, through a real helper: tests/resident)."""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.resident import arbiter, call_process
from resource_extend.commands.resident.arbiter import Helper
from resource_extend.commands.resident.call_process import ASK, FREE, OFF, TOOK, CallProcess


class Socket:
    """A listening socket, as the helper's, and the calls made to it."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(16)
        self.listener.setblocking(False)  # as the helper leaves it for its call processes
        self.callers: list[socket.socket] = []

    def call(self, calls: int) -> None:
        for _ in range(calls):
            caller = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            caller.connect(self.path)
            caller.sendall(b"call %d" % len(self.callers))
            self.callers.append(caller)

    def close(self) -> None:
        for caller in self.callers:
            caller.close()
        self.listener.close()


class Pair:
    """The helper's end of a call process's pair, and what the process served."""

    def __init__(self) -> None:
        self.helper, self.process = socket.socketpair()
        self.served: list[bytes] = []

    def said(self) -> bytes:
        self.helper.setblocking(False)
        try:
            return self.helper.recv(64)
        except BlockingIOError:
            return b""


@pytest.fixture
def helper(tmp_path: Path) -> Iterator[Helper]:
    directory = os.open(tmp_path, os.O_RDONLY)
    with socket.socket(socket.AF_UNIX) as listener:
        made = arbiter.Helper(
            GPU, listener, directory, "x.sock", 0, str(tmp_path / "gpu.yaml"), "x.sock"
        )
        yield made
    made._wake.close()  # (what serving would close on the way out)
    made._woken.close()
    os.close(directory)


@pytest.fixture
def calls(tmp_path: Path) -> Iterator[Socket]:
    made = Socket(tmp_path / "calls.sock")
    yield made
    made.close()


@pytest.fixture
def loop(helper: Helper) -> CallProcess:
    """A call process of the helper, its loop run in this process."""
    return CallProcess(helper)


@pytest.fixture
def pair(loop: CallProcess, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pair]:
    made = Pair()

    def serve(call: socket.socket) -> None:
        with call:
            made.served.append(call.recv(64))

    monkeypatch.setattr(loop, "_serve_call", serve)
    yield made
    made.helper.close()
    made.process.close()


def test_it_takes_calls_in_turn_saying_when_it_took_each_and_when_it_is_free(
    loop: CallProcess, pair: Pair, calls: Socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(call_process, "RETIRE_AFTER", 3)
    calls.call(4)
    loop.work(pair.process, calls.listener)
    assert pair.served == [b"call 0", b"call 1", b"call 2"]
    assert pair.said() == (TOOK + FREE) * 2 + TOOK  # the third was its last: it leaves
    calls.listener.setblocking(True)
    with calls.listener.accept()[0] as left:
        assert left.recv(64) == b"call 3"  # left for another process


def test_it_leaves_after_a_call_that_grew_it(
    loop: CallProcess, pair: Pair, calls: Socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept: list[bytes] = []

    def serve(call: socket.socket) -> None:
        with call:
            pair.served.append(call.recv(64))
            kept.append(b"x" * (call_process.RETIRE_GROWTH + (8 << 20)))  # written: resident

    monkeypatch.setattr(loop, "_serve_call", serve)
    calls.call(2)
    loop.work(pair.process, calls.listener)
    assert pair.served == [b"call 0"]
    assert pair.said() == TOOK


def test_it_leaves_when_the_helper_hangs_up_and_takes_no_call_after(
    loop: CallProcess, pair: Pair, calls: Socket
) -> None:
    pair.helper.close()
    calls.call(1)
    loop.work(pair.process, calls.listener)  # the helper's hanging up comes first
    assert pair.served == []


def test_a_call_process_asks_the_helper_for_its_counts(loop: CallProcess, pair: Pair) -> None:
    loop._pair = pair.process

    def answer() -> None:
        pair.helper.settimeout(5)
        assert pair.helper.recv(64) == ASK
        pair.helper.sendall(b"7 1 4242 %d\n" % os.getpid())

    helper = threading.Thread(target=answer)
    helper.start()
    counts = loop._counts()
    helper.join(10)
    assert counts == (7, True, {4242})  # itself left out


def test_a_status_asked_of_a_helper_that_does_not_answer_counts_nothing(
    loop: CallProcess, pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(call_process, "ASK_WAIT", 0.2)
    loop._pair = pair.process
    assert loop._counts() == (None, False, set())
    assert pair.said() == ASK


class Workers:
    """Call processes as the helper keeps them: ``sleep`` processes, each with a pair whose
    far end the test holds (to hear the helper hang up)."""

    def __init__(self, helper: Helper, count: int) -> None:
        self.helper = helper
        self.processes = [subprocess.Popen(["sleep", "60"]) for _ in range(count)]
        self.far: list[socket.socket] = []
        self.workers = []
        for process in self.processes:
            ours, theirs = socket.socketpair()
            worker = arbiter.Worker(process.pid, ours)
            helper._selector.register(ours, selectors.EVENT_READ, worker)
            self.workers.append(worker)
            self.far.append(theirs)

    def hung_up(self) -> list[bool]:
        """Which the helper has hung up on (dismissed)."""
        found = []
        for theirs in self.far:
            theirs.setblocking(False)
            try:
                found.append(theirs.recv(1) == b"")
            except BlockingIOError:
                found.append(False)
        return found

    def say(self, index: int, words: bytes) -> None:
        self.far[index].sendall(words)
        self.helper._hear(self.helper._selector.select(1))

    def end(self) -> None:
        for end in (*self.far, *(worker.pair for worker in self.workers)):
            end.close()
        for process in self.processes:
            process.kill()
            process.wait()
        self.helper._reap()
        assert self.helper._leaving == []


@pytest.fixture
def workers(helper: Helper) -> Iterator[Workers]:
    made = Workers(helper, 4)
    yield made
    made.end()


def test_the_helper_keeps_one_idle_process_and_any_that_was_free_lately(
    helper: Helper, workers: Workers
) -> None:
    """Idle call processes that have waited ``KEEP_IDLE`` seconds are dismissed, but one; the
    one free last is kept."""
    now = time.monotonic()
    for worker, waited in zip(workers.workers, (90, 70, 30, 10), strict=True):
        worker.free_since = now - waited
    helper._idle = list(workers.workers)
    helper._trim()
    assert helper._idle == workers.workers[2:]  # the two that waited longest left
    assert workers.hung_up() == [True, True, False, False]
    assert sorted(helper._leaving) == sorted(p.pid for p in workers.processes[:2])


def test_the_last_idle_process_is_kept_however_long_it_waits(
    helper: Helper, workers: Workers
) -> None:
    [first, *_] = workers.workers
    first.free_since = time.monotonic() - 10 * arbiter.KEEP_IDLE
    helper._idle = [first]
    helper._trim()
    assert helper._idle == [first] and workers.hung_up()[0] is False


def test_the_helper_counts_calls_as_their_processes_say(helper: Helper, workers: Workers) -> None:
    first, second = workers.workers[:2]
    helper._idle = [first, second]
    workers.say(0, TOOK)
    assert helper._idle == [second] and list(helper._busy) == [first.pid]
    workers.say(0, FREE + TOOK)  # said together: heard in turn
    assert helper.served == 1 and list(helper._busy) == [first.pid]
    workers.say(0, FREE)
    assert helper.served == 2 and helper._idle == [second, first] and not helper._busy
    assert workers.hung_up() == [False] * 4


def test_a_call_process_out_of_step_is_dismissed(helper: Helper, workers: Workers) -> None:
    helper._idle = list(workers.workers)
    workers.say(1, FREE)  # free, having taken no call
    assert workers.hung_up() == [False, True, False, False]
    assert workers.workers[1] not in helper._idle


def test_one_free_beyond_the_idle_kept_is_dismissed(
    helper: Helper, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(arbiter, "MAX_IDLE", 2)
    helper._idle = list(workers.workers[:2])
    helper._busy = {workers.workers[2].pid: workers.workers[2]}
    workers.say(2, FREE + TOOK)  # what it said after it was dismissed is not heard
    assert workers.hung_up() == [False, False, True, False]
    assert not helper._busy and helper.served == 1


def test_a_call_process_gone_ends_its_call(helper: Helper, workers: Workers) -> None:
    helper._busy = {workers.workers[0].pid: workers.workers[0]}
    workers.far[0].close()
    helper._hear(helper._selector.select(1))
    assert helper.served == 1 and not helper._busy
    assert workers.processes[0].pid in helper._leaving


def test_a_call_process_finding_the_helper_turned_off_stops_it(
    helper: Helper, workers: Workers
) -> None:
    helper._idle = list(workers.workers)
    workers.say(0, TOOK + OFF)
    assert helper.stopping


def test_a_status_question_is_answered_after_what_else_was_said(
    helper: Helper, workers: Workers
) -> None:
    """A call over by the time a status call asks counts as over: the helper hears every
    process before it answers."""
    first, second = workers.workers[:2]
    helper._busy = {first.pid: first, second.pid: second}
    workers.far[0].sendall(FREE)
    workers.far[1].sendall(ASK)
    ready = [key for key in helper._selector.select(1) if key[0].data is second]
    helper._hear(ready)  # the question alone: the other's word is heard before the answer
    workers.far[1].settimeout(5)
    assert workers.far[1].recv(64) == b"1 0 %d\n" % second.pid
