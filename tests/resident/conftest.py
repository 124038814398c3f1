"""Each test gets a runtime directory of its own (``XDG_RUNTIME_DIR``), so the helpers it
starts are its own; any still running are stopped after it, and fakes are killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.resident import client as resident
from tests.plugin import Plugin, R, kill_helpers_for, stop_helpers

ROOT = Path(__file__).resolve().parents[2]
G = "nvidia-3090"
"""The product the resident tests deal in."""
TAKE = {"nodename": "n1", "resource": R({G: 1}), "delta": True, "incr": True}
"""set-node-resource-usage taking one card of ``G`` on n1."""


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's runtime directory; the helpers' own directory is ``resource-gpu-<uid>``
    inside it."""
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(directory))
    monkeypatch.delenv(GPU.env("RESIDENT"), raising=False)
    yield directory
    stop_helpers()
    kill_helpers_for(str(tmp_path))


def own_dir(runtime: Path) -> Path:
    return runtime / f"resource-gpu-{os.getuid()}"


def socket_of(plugin: Plugin, runtime: Path) -> Path:
    return own_dir(runtime) / resident.socket_name(str(plugin.config))


def helper_pid(plugin: Plugin) -> int | None:
    """The pid of the helper serving the plugin's config, if one answers."""
    link = resident.Link.connect(plugin.program, resident.socket_name(str(plugin.config)))
    if link is None:
        return None
    link.close()
    return link.pid


def wait_for(condition: Callable[[], object], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting: {what}")


def alive(pid: int) -> bool:
    """Running (a zombie is not: it runs no code and holds no descriptor)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that still run."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def call_processes(helper: int) -> list[int]:
    """The helper's children once they have been the same for a while: its call processes,
    each waiting for a call."""
    seen: list[list[int]] = []

    def settled() -> bool:
        seen.append(sorted(children(helper)))
        time.sleep(0.1)
        return len(seen) >= 3 and bool(seen[-1]) and seen[-1] == seen[-2] == seen[-3]

    wait_for(settled, "the helper's call processes, all waiting")
    return seen[-1]


def resident_plugin(plugin: Plugin, *, on: bool = True, **etcd: object) -> Plugin:
    """The plugin with the helper on (or off), over HTTP, whatever mode the suite runs in."""
    config = json.loads(plugin.config.read_text())
    config["resident"] = on
    config["etcd"].update({"transport": "http", **etcd})
    plugin.config.write_text(json.dumps(config))
    return plugin


def started(plugin: Plugin) -> int:
    """Add node n1 (8 cards), which starts the helper; its pid once it answers."""
    plugin.add("n1", {"nvidia-3090": 8})
    wait_for(lambda: helper_pid(plugin), "the helper to answer")
    pid = helper_pid(plugin)
    assert pid is not None
    return pid


class Fake:
    """A helper with a fault, in a process of its own (tests/resident/fake_helper.py)."""

    def __init__(self, fault: str, plugin: Plugin) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.resident.fake_helper", fault, str(plugin.config)],
            cwd=ROOT,
            # the environment the plugin's calls have (a helper serves only callers whose
            # HOME and trust are its starter's: client.CALLERS_ENVIRONMENT)
            env={**os.environ, "HOME": str(plugin.workdir / "home")},
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # as a real helper: out of reach of the shell's job control
        )
        wait_for(lambda: helper_pid(plugin) == self.process.pid, f"the {fault} fake to listen")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def fake(runtime: Path) -> Iterator[Callable[[str, Plugin], Fake]]:
    fakes: list[Fake] = []

    def start(fault: str, plugin: Plugin) -> Fake:
        fakes.append(Fake(fault, plugin))
        return fakes[-1]

    yield start
    for one in fakes:
        one.kill()
