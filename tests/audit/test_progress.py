"""The commands people run over many nodes (``verify --all``, ``compact --all``, ``nodes``,
``archive``, ``migrate``) show click's progress bar on stderr when it is a terminal, and print
nothing extra when it is not; core's verbs never do (stdout is the protocol, stderr stays clean on
success). Each run as a process of its own, its stderr a pseudo-terminal or a pipe."""

from __future__ import annotations

import os
import pty
import select
import subprocess
from pathlib import Path

import pytest

from tests.audit.helpers import added, event, head, plant, take, used, write_streams
from tests.etcdkv import Etcd
from tests.plugin import Plugin, command_for

pytestmark = pytest.mark.etcd

G = "nvidia-3090"


def run(
    plugin: Plugin, args: list[str], *, terminal: bool, stdin: bytes = b""
) -> tuple[int, bytes, bytes]:
    """``args`` as its program runs them, stderr a pseudo-terminal (``terminal``) or a pipe:
    the exit status, stdout, and what reached stderr."""
    env = {**os.environ, "ERU_RESOURCE_CONFIG_PATH": str(plugin.config), "COLUMNS": "100"}
    command = [*command_for(plugin.program, args[0]), *args]
    if not terminal:
        done = subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=60)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=follower, env=env
    )
    os.close(follower)
    out, _ = process.communicate(stdin, timeout=60)
    return process.returncode, out, drained(leader, quiet=0.5)


def drained(leader: int, quiet: float | None = None) -> bytes:
    """All a pseudo-terminal's other end wrote, until it closes (or, given ``quiet``, falls
    silent that many seconds: a process that is done); the leader is closed."""
    said = b""
    while quiet is None or select.select([leader], [], [], quiet)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end is closed: all is read
            break
        if not chunk:
            break
        said += chunk
    os.close(leader)
    return said


@pytest.fixture
def fleet(plugin: Plugin) -> Plugin:
    for index in range(3):
        plugin.add(f"n{index}", {G: 2})
    return plugin


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["verify", "--all"], b"verifying"),
        (["compact", "--all", "--keep", "1", "--min-age", "0"], b"compacting"),
        (["nodes"], b"reading nodes"),
    ],
    ids=["verify", "compact", "nodes"],
)
def test_long_work_shows_progress_on_a_terminal_and_nothing_on_a_pipe(
    fleet: Plugin, args: list[str], label: bytes
) -> None:
    status, out, said = run(fleet, args, terminal=True)
    assert status == 0, said
    assert label in said and b"100%" in said, said  # the bar, done
    assert label not in out  # the answer is as it always was
    status, piped_out, piped = run(fleet, args, terminal=False)
    assert (status, piped) == (0, b"")
    assert piped_out == out or args[0] == "compact"  # (a second compaction has less to do)


def test_a_fleets_pages_show_progress_on_a_terminal_and_nothing_on_a_pipe(
    fleet: Plugin, tmp_path: Path
) -> None:
    pages = tmp_path / "fleet"
    status, out, said = run(fleet, ["nodes", "--html", str(pages)], terminal=True)
    assert status == 0, said
    assert b"writing pages" in said and b"100%" in said, said
    assert out.startswith(b"wrote ") and b"writing pages" not in out
    status, piped_out, piped = run(fleet, ["nodes", "--html", str(pages)], terminal=False)
    assert (status, piped, piped_out) == (0, b"", out)  # the earlier pages, replaced


def test_an_archiving_pass_shows_progress_on_a_terminal_and_nothing_on_a_pipe(
    fleet: Plugin, tmp_path: Path
) -> None:
    """Each stream over half its bound (4 events, of 8) is archived under the bar; a second
    pass, with nothing left to do, on a pipe prints its line and nothing else."""
    archive = tmp_path / "archive"
    write_streams(fleet, {"max_events": 8, "archive_dir": str(archive), "min_age": 0})
    for node in ("n0", "n1", "n2"):
        for turn in range(6):  # a card taken and given back, by turns
            verb, request = take(node, {G: 1})
            fleet.ok(verb, {**request, "incr": turn % 2 == 0})
    status, out, said = run(fleet, ["archive"], terminal=True)
    assert status == 0, said
    assert b"archiving" in said and b"100%" in said, said
    assert b"3 streams compacted" in out, out
    status, out, piped = run(fleet, ["archive"], terminal=False)
    assert (status, piped) == (0, b"")
    assert b"0 streams compacted" in out, out


def test_a_migration_shows_progress_on_a_terminal_and_nothing_on_a_pipe(
    plugin: Plugin, etcd: Etcd
) -> None:
    """Three nodes with their streams in 0.1's layout are moved under the bar; a second run,
    with nothing left to move, on a pipe prints its line and nothing else."""
    for node in ("n0", "n1", "n2"):
        events = [event(1, added({G: 2})), event(2, used({G: 1}))]
        plant(etcd, node, events, head({G: 2}, {G: 1}, 2), legacy=True)
    status, out, said = run(plugin, ["migrate"], terminal=True)
    assert status == 0, said
    assert b"migrating" in said and b"100%" in said, said
    assert out.count(b"2 events moved") == 3, out
    status, out, piped = run(plugin, ["migrate"], terminal=False)
    assert (status, piped) == (0, b"")
    assert b"nothing to migrate" in out, out


def test_a_core_verb_prints_no_progress_on_a_terminal(fleet: Plugin) -> None:
    request = (
        b'{"nodenames": ["n0", "n1", "n2"], "workload_resource": {"prod_count_map": {"%s": 1}}}'
        % G.encode()
    )
    status, out, said = run(fleet, ["get-nodes-deploy-capacity"], terminal=True, stdin=request)
    assert (status, said) == (0, b"")
    assert b"nodes_deploy_capacity_map" in out


def printed_on_a_terminal(plugin: Plugin, args: list[str], width: int) -> str:
    """What ``args`` print with stdout a pseudo-terminal ``width`` columns wide."""
    env = {**os.environ, "ERU_RESOURCE_CONFIG_PATH": str(plugin.config), "COLUMNS": str(width)}
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [*command_for(plugin.program, args[0]), *args],
        stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    os.close(follower)
    said = drained(leader)
    assert process.wait(timeout=60) == 0
    return said.decode().replace("\r\n", "\n")


def test_a_storage_history_on_a_terminal_wraps_to_its_width_and_on_a_pipe_does_not(
    storage: Plugin,
) -> None:
    """A storage node's history is about 200 columns: on a terminal of 120 its states and
    changes are wrapped at their words to fit; piped, each event stays one line."""
    resource = {
        "volumes": ["/data0:1T", "/data1:1T"],
        "storage": "200G",
        "disks": ["/dev/vda:/data0,/data1:1000:1000:1G:1G"],
    }
    storage.ok("add-node", {"nodename": "d1", "resource": resource})
    shown = printed_on_a_terminal(storage, ["history", "d1"], 120).rstrip("\n").splitlines()
    assert len(shown) > 2 and max(map(len, shown)) <= 120, shown
    piped = storage.run("history", None, "d1")
    assert piped.status == 0 and len(piped.stdout.splitlines()) == 2
    assert max(map(len, piped.stdout.splitlines())) > 120  # as wide as it needs
    first = next(line for line in shown if line.startswith("1 "))  # the header takes 3 lines
    assert first.split()[:4] == piped.stdout.splitlines()[1].split()[:4]
