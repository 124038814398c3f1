"""The helper is visible and tidy: its process title names the plugin and its config,
``resource-gpu helper`` shows and stops it, SIGTERM stops it, and a helper that exits leaves
nothing behind in the runtime directory."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.plugin import Plugin, Result
from tests.resident.conftest import (
    alive,
    own_dir,
    resident_plugin,
    started,
    the_spare,
    wait_for,
)


def helper(plugin: Plugin, *args: str) -> Result:
    return plugin.run("helper", None, *args)


def test_its_process_title_names_the_plugin_and_its_config(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    pid = started(plugin)
    title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
    assert title == f"resource-gpu helper {plugin.config}".encode()


def test_helper_shows_pid_version_config_uptime_and_calls(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    pid = started(plugin)
    plugin.info("n1")
    shown = helper(plugin)
    assert shown.status == 0, shown.stderr
    assert f"pid       {pid}\n" in shown.stdout
    assert f"config    {plugin.config}\n" in shown.stdout
    for label in ("version   resource-gpu ", "started   ", "(up ", "calls     "):
        assert label in shown.stdout, shown.stdout
    [status] = json.loads(helper(plugin, "--json").stdout)
    assert status["pid"] == pid and status["config"] == str(plugin.config)
    assert status["calls_served"] >= 1 and status["calls_in_flight"] == 0
    assert status["uptime_s"] > 0


def test_helper_says_so_when_none_runs(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin, on=False)
    shown = helper(plugin)
    assert (shown.status, shown.stderr) == (3, "")
    assert shown.stdout == f"no helper is running for {plugin.config}\n"


def test_helper_stop_stops_it_and_leaves_nothing_behind(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    pid = started(plugin)
    spare = the_spare(pid)
    stopped = helper(plugin, "--stop")
    assert stopped.status == 0, stopped.stderr
    assert f"stopped (pid {pid})" in stopped.stdout
    assert not alive(pid)
    assert not alive(spare), "the spare forked for the next call outlived the helper"
    assert list(own_dir(runtime).iterdir()) == []
    assert helper(plugin).status == 3


def test_sigterm_stops_it_and_leaves_nothing_behind(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    pid = started(plugin)
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not alive(pid), "the helper to exit")
    assert list(own_dir(runtime).iterdir()) == []


def test_helper_all_stop_stops_every_helper_and_clears_stale_sockets(
    plugin: Plugin, runtime: Path, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    other = Plugin(plugin.endpoints, tmp_path / "other")
    pids = [started(resident_plugin(p)) for p in (plugin, other)]
    os.kill(pids[1], signal.SIGKILL)  # leaves its socket behind: stale
    wait_for(lambda: not alive(pids[1]), "the killed helper to die")
    listed = helper(plugin, "--all")
    assert listed.status == 0
    assert listed.stdout.count("running") == 1 and "stale" in listed.stdout, listed.stdout
    stopped = helper(plugin, "--all", "--stop")
    assert stopped.status == 0, stopped.stderr
    assert "stopped (pid" in stopped.stdout and "removed a stale socket" in stopped.stdout
    time.sleep(0.1)
    assert list(own_dir(runtime).iterdir()) == []
