"""The resident helper (commands/resident.py, commands/residentd.py): calls it serves answer
exactly as calls run in-process; it never holds core's pipes; it is easy to turn off; it
follows config changes; and when it dies mid-call nothing is lost or applied twice.

Each test gets its own runtime directory (``XDG_RUNTIME_DIR``), so its helpers are its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commands import resident
from commands.residentd import Helper, _read_call
from tests.etcdkv import Etcd
from tests.plugin import Plugin, R, counts

G = "nvidia-3090"
TAKE = {"nodename": "n1", "resource": R({G: 1}), "delta": True, "incr": True}


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A runtime directory of this test's own; any helper started in it is stopped after."""
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(directory))
    monkeypatch.delenv(resident.OFF_ENV, raising=False)
    yield directory
    for pid in helper_pids(directory):
        os.kill(pid, signal.SIGTERM)


def helper_pids(directory: Path) -> list[int]:
    """Processes serving a socket under ``directory`` (from /proc: no extra tools)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"commands.residentd" in argv and any(str(directory).encode() in a for a in argv):
                pids.append(int(proc.name))
    return pids


def helper_up(runtime: Path) -> bool:
    path = Path(resident.socket_path())
    assert path.parent == runtime / f"resource-gpu-{os.getuid()}"
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def wait_for(condition: Any, what: str) -> None:
    for _ in range(200):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting: {what}")


def resident_plugin(plugin: Plugin, *, on: bool = True) -> Plugin:
    config = json.loads(plugin.config.read_text())
    config["resident"] = on
    config["etcd"]["transport"] = "http"
    plugin.config.write_text(json.dumps(config))
    return plugin


def test_a_call_starts_a_helper_without_holding_cores_pipes(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    # The first call runs in-process and starts the helper; had the helper inherited stdout,
    # this call would not return (the harness reads the pipes to their end).
    plugin.add("n1", {G: 4})
    wait_for(lambda: helper_up(runtime), "the helper to listen")
    assert (runtime / f"resource-gpu-{os.getuid()}").stat().st_mode & 0o077 == 0


def test_answers_through_the_helper_are_the_in_process_answers(
    plugin: Plugin, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resident_plugin(plugin)
    plugin.add("n1", {G: 4})
    wait_for(lambda: helper_up(runtime), "the helper to listen")
    calls: list[tuple[str, Any]] = [
        ("get-node-resource-info", {"nodename": "n1"}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n1"], "resource_request": R({G: 1})}),
        ("calculate-deploy", {"nodename": "n1", "deploy_count": 9, "resource_request": R({G: 1})}),
        ("get-node-resource-info", {"nodename": "nope"}),
        ("set-node-resource-usage", {"nodename": "n1", "resource": R({G: 99}), "delta": True}),
        ("add-node", "{not json"),
    ]
    for verb, request in calls:
        raw = request.encode() if isinstance(request, str) else None
        served = plugin.run(verb, request, raw=raw)
        monkeypatch.setenv(resident.OFF_ENV, "0")
        local = plugin.run(verb, request, raw=raw)
        monkeypatch.delenv(resident.OFF_ENV)
        assert (served.status, served.stdout, served.stderr) == (
            local.status,
            local.stdout,
            local.stderr,
        ), verb


def test_writes_through_the_helper_are_applied_once(
    plugin: Plugin, runtime: Path, etcd: Etcd
) -> None:
    resident_plugin(plugin)
    plugin.add("n1", {G: 64})
    wait_for(lambda: helper_up(runtime), "the helper to listen")
    answers = [plugin.ok("set-node-resource-usage", TAKE) for _ in range(5)]
    assert [counts(a["after"]) for a in answers] == [{G: n} for n in range(1, 6)]
    assert len(etcd.events("n1")) == 1 + 5


def test_it_is_easy_to_turn_off(
    plugin: Plugin, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resident_plugin(plugin, on=False)
    plugin.add("n1", {G: 4})
    plugin.info("n1")
    monkeypatch.setenv(resident.OFF_ENV, "0")
    resident_plugin(plugin, on=True)
    plugin.info("n1")
    time.sleep(0.5)
    assert not helper_up(runtime), "a helper started although it was turned off"


def test_turning_it_off_in_the_config_stops_a_running_helper(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    plugin.add("n1", {G: 4})
    wait_for(lambda: helper_up(runtime), "the helper to listen")
    resident_plugin(plugin, on=False)  # the helper re-reads a changed config
    assert counts(plugin.info("n1")["capacity"]) == {G: 4}
    wait_for(lambda: not helper_up(runtime), "the helper to stop")
    assert counts(plugin.info("n1")["capacity"]) == {G: 4}  # calls go on in-process


class DiesBeforeAnswering(Helper):
    """The real helper, except that it dies (drops the client) after running the call, before
    its answer: the fault of a helper killed between its write and its reply."""

    def _serve_call(self, connection: socket.socket) -> None:
        request = _read_call(connection)
        assert request is not None
        verb, config_path, stdin = request
        self.ran = self._run(connection, verb, config_path, stdin)
        connection.close()


@pytest.fixture
def dying_helper(runtime: Path) -> Iterator[DiesBeforeAnswering]:
    directory = Path(resident.runtime_dir())
    directory.mkdir(mode=0o700)
    path = resident.socket_path()
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a helper does: the real ones calls start give way
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(8)
        helper = DiesBeforeAnswering(listener)
        threading.Thread(target=helper.serve, daemon=True).start()
        yield helper
        listener.close()


def test_a_write_whose_helper_died_after_writing_is_not_applied_twice(
    plugin: Plugin, etcd: Etcd, dying_helper: DiesBeforeAnswering
) -> None:
    resident_plugin(plugin)
    plugin.add("n1", {G: 8})  # served (and answered by nobody): resumed in-process
    answer = plugin.ok("set-node-resource-usage", TAKE)
    status, out, _ = dying_helper.ran
    assert status == 0
    assert json.loads(out) == answer, "the resumed call did not answer with the landed write"
    events = etcd.event_docs("n1")
    assert [e["change"]["kind"] for e in events] == ["node_added", "usage_changed"]
    assert counts(plugin.info("n1")["usage"]) == {G: 1}


def test_a_read_whose_helper_died_runs_again_in_process(
    plugin: Plugin, dying_helper: DiesBeforeAnswering
) -> None:
    resident_plugin(plugin)
    plugin.add("n1", {G: 8})
    assert counts(plugin.info("n1")["capacity"]) == {G: 8}
