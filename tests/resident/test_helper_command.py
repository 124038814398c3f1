"""The helper is visible and tidy: its process title names the plugin and its config,
``resource-gpu helper`` shows and stops it, SIGTERM stops it, and a helper that exits leaves
nothing behind in the runtime directory."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.plugin import Plugin, R, Result, copied_code
from tests.resident.conftest import (
    alive,
    call_processes,
    own_dir,
    resident_plugin,
    started,
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
    plugin.info("n1")
    waiting = call_processes(pid)
    stopped = helper(plugin, "--stop")
    assert stopped.status == 0, stopped.stderr
    assert f"stopped (pid {pid})" in stopped.stdout
    assert not alive(pid)
    left = [process for process in waiting if alive(process)]
    assert not left, "call processes outlived the helper"
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


def test_a_helper_left_by_an_upgrade_reports_the_code_it_runs(
    plugin: Plugin, runtime: Path, tmp_path: Path
) -> None:
    """A helper reports the version and code it started with, not what the files on disk say
    when asked: after an upgrade (here, a file of an installation of its own touched), the old
    helper shows its old code, and doctor warns that it runs other code. The installation is a
    copy in the test's directory, so that no other test's helper sees the change."""
    copy = copied_code(tmp_path / "code")
    env = {"PYTHONPATH": str(tmp_path / "code")}
    resident_plugin(plugin)
    added = plugin.run("add-node", {"nodename": "n1", "resource": R({"g": 1})}, env=env)
    assert added.status == 0, added.stderr
    wait_for(lambda: listed(plugin, env), "the helper to answer")
    [before] = listed(plugin, env)
    upgraded = copy / "commands" / "resident" / "client.py"
    stat = upgraded.stat()
    os.utime(upgraded, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))

    [after] = listed(plugin, env)
    assert after["pid"] == before["pid"]
    assert after["code"] == before["code"], "the helper reported the code on disk, not its own"
    checked = plugin.run("doctor", None, "--json", env=env)
    old = [f for f in json.loads(checked.stdout) if f["check"].startswith("helper ")]
    assert [f["status"] for f in old] == ["warn"], old
    assert f"code {before['code']}, not this installation's" in old[0]["message"], old


def listed(plugin: Plugin, env: dict[str, str]) -> list[dict[str, object]]:
    """``helper --all --json``: every helper of this user's runtime directory."""
    shown = plugin.run("helper", None, "--all", "--json", env=env)
    assert shown.status in (0, 3), shown.stderr
    return json.loads(shown.stdout) if shown.status == 0 else []
