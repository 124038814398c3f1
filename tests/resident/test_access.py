"""Nobody else's helper, nobody else's calls: the helper is reachable only by its own user,
checked at both ends (peer credentials, and every directory on the socket's path), and it
holds none of the descriptors of the process that started it.

Acting as another user needs root (the suite runs as root in CI): those tests say so."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from resource_extend.commands.resident import client as resident
from tests.plugin import Plugin, binary, counts
from tests.resident.conftest import (
    ROOT,
    G,
    helper_pid,
    own_dir,
    resident_plugin,
    started,
    wait_for,
)

STRANGER = "nobody"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")


def stranger() -> tuple[int, int]:
    entry = pwd.getpwnam(STRANGER)
    return entry.pw_uid, entry.pw_gid


FORGER = """
import os, socket, sys
uid, gid, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
heard = open(sys.argv[4], "ab", buffering=0)
listener = socket.socket(socket.AF_UNIX)
os.umask(0o111)
listener.bind(path)                      # bound by root, in root's private directory ...
os.setgid(gid); os.setuid(uid)
listener.listen(8)                       # ... but listening as the stranger (SO_PEERCRED)
print("ready", flush=True)
while True:
    connection, _ = listener.accept()
    try:
        heard.write(connection.recv(65536))
        connection.sendall(b"A 9\\nR 0 41 0\\n" + b'{"capacity":{"prod_count_map":{"x":999}}}\\n')
    except OSError:  # the caller hung up on us
        pass
    connection.close()
"""


@pytest.fixture
def forged(plugin: Plugin, runtime: Path, tmp_path: Path) -> Iterator[Path]:
    """A socket where the plugin's helper would be, answered by another user's process with
    made-up capacities; yields the file where it writes whatever it hears."""
    own_dir(runtime).mkdir(mode=0o700, exist_ok=True)  # parsed copies may be there
    heard = tmp_path / "heard"
    heard.touch(mode=0o666)
    uid, gid = stranger()
    path = own_dir(runtime) / resident.socket_name(str(plugin.config))
    forger = subprocess.Popen(
        [sys.executable, "-c", FORGER, str(uid), str(gid), str(path), str(heard)],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert forger.stdout is not None and forger.stdout.readline() == b"ready\n"
    yield heard
    assert forger.poll() is None, "the forger died: the test proved nothing"
    forger.kill()
    forger.wait()


@needs_root
def test_a_call_never_talks_to_a_helper_of_another_user(plugin: Plugin, forged: Path) -> None:
    resident_plugin(plugin, on=False)
    plugin.add("n1", {G: 4})
    resident_plugin(plugin)
    assert counts(plugin.info("n1")["capacity"]) == {G: 4}  # not the forger's x:999
    assert forged.read_bytes() == b"", "the request went to another user's process"


@needs_root
def test_a_helper_never_serves_a_caller_of_another_user(
    plugin: Plugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = Path(tempfile.mkdtemp(prefix="resource-gpu-test-"))  # in /tmp: others may reach it
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    try:
        resident_plugin(plugin)
        started(plugin)
        path = own_dir(base) / resident.socket_name(str(plugin.config))
        for opened in (base, own_dir(base)):
            opened.chmod(0o711)  # a mistake that lets others reach the socket
        path.chmod(0o666)
        uid, gid = stranger()
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                STRANGER_CALL,
                str(uid),
                str(gid),
                str(path),
                resident.call_request(
                    "get-node-resource-info",
                    str(plugin.config),
                    resident.installation(),
                    b'{"nodename": "n1"} ',
                ).hex(),
            ],
            capture_output=True,
            cwd=ROOT,
            timeout=30,
        )
        assert probe.returncode == 0, probe.stderr.decode()
        assert probe.stdout == b"answered: b''\n", "the helper answered another user"
    finally:
        plugin.stop_helper()
        shutil.rmtree(base)


STRANGER_CALL = """
import os, socket, sys
uid, gid, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
call = bytes.fromhex(sys.argv[4])  # the call a caller of the helper's own would send
os.setgid(gid); os.setuid(uid)
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(10)
sock.connect(path)
try:  # the helper may close before the request is all sent, or before it is read
    sock.sendall(call)
    answer = sock.recv(65536)
except (BrokenPipeError, ConnectionResetError):  # closed unread: refused
    answer = b""
print("answered:", answer)
"""


@needs_root
def test_a_runtime_directory_inside_another_users_directory_is_not_used(
    plugin: Plugin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root after a plain ``su`` keeps the user's ``XDG_RUNTIME_DIR``: that user could swap
    what is in it. The helper goes to /tmp/resource-gpu-<uid> instead."""
    theirs = tmp_path / "user-runtime"
    theirs.mkdir(mode=0o700)
    uid, gid = stranger()
    os.chown(theirs, uid, gid)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(theirs))
    resident_plugin(plugin)
    try:
        plugin.add("n1", {G: 4})
        wait_for(lambda: helper_pid(plugin), "the helper to answer")
        assert list(theirs.iterdir()) == []
        link = resident.Link.connect(plugin.program, resident.socket_name(str(plugin.config)))
        assert link is not None
        link.close()
        assert Path(
            f"/tmp/resource-gpu-{os.getuid()}", resident.socket_name(str(plugin.config))
        ).exists()
    finally:
        plugin.stop_helper()


def test_a_runtime_directory_others_can_write_is_not_used(
    plugin: Plugin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Owned by us, but writable by everyone (and not sticky): anyone could rename our
    directory away and put theirs in its place."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    resident_plugin(plugin)
    try:
        plugin.add("n1", {G: 4})
        assert counts(plugin.info("n1")["capacity"]) == {G: 4}
        assert list(shared.iterdir()) == [], "a helper lives in a directory others can write"
    finally:
        plugin.stop_helper()


def open_files(pid: int) -> set[str]:
    """What `pid` holds open; a descriptor it closes while we look (a finished etcd
    connection) is skipped, not an error."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return held


def test_the_helper_holds_no_descriptor_of_the_process_that_started_it(
    plugin: Plugin, runtime: Path, tmp_path: Path
) -> None:
    """Core may hand the plugin descriptors (a pipe, a lock file); a helper that kept them
    would keep the pipe open and the file locked long after the call."""
    resident_plugin(plugin)
    read_end, write_end = os.pipe()
    lock_file = tmp_path / "held.lock"
    lock = os.open(lock_file, os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    request = b'{"nodename": "n1", "resource": {"prod_count_map": {"nvidia-3090": 4}}}'
    call = subprocess.run(
        [*binary(), "add-node"], input=request, capture_output=True, pass_fds=(write_end, lock),
        env={**os.environ, "ERU_RESOURCE_CONFIG_PATH": str(plugin.config)}, timeout=60,
    )  # fmt: skip
    assert call.returncode == 0, call.stderr
    wait_for(lambda: helper_pid(plugin), "the helper to answer")
    pid = helper_pid(plugin)
    assert pid is not None
    assert str(lock_file) not in open_files(pid)
    os.close(write_end)
    os.set_blocking(read_end, False)
    try:
        assert os.read(read_end, 1) == b"", "the pipe carried data"
    except BlockingIOError:
        raise AssertionError("someone still holds the pipe's write end") from None
    finally:
        os.close(read_end)
    os.close(lock)
    again = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody holds the lock now
    finally:
        os.close(again)


STRANGER_DOCTOR = """
import importlib, os, pkgutil, sys
import resource_extend.commands, resource_extend.ledger, resource_extend.projections
# Everything loaded first, as root: the checkout (CI's clone, say) need not be readable by others.
for package in (resource_extend.commands, resource_extend.ledger, resource_extend.projections):
    for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(found.name)
import click, yaml  # and what the code imports only when it needs it
uid, gid = int(sys.argv[1]), int(sys.argv[2])
os.setgroups([]); os.setgid(gid); os.setuid(uid)
from resource_extend.commands.main import main
from resource_extend.commands.gpu.plugin import PLUGIN
main(PLUGIN, sys.argv[3:])
"""
"""``resource-gpu ARGS`` (argv 3 on) run as the user of argv 1 and 2."""


@needs_root
@pytest.mark.parametrize("made", [False, True], ids=["base", "own directory"])
def test_a_runtime_directory_its_user_cannot_write_is_a_doctor_failure(
    plugin: Plugin, made: bool
) -> None:
    """``$XDG_RUNTIME_DIR`` (or the helper's directory in it) exists, is the user's own, but
    cannot be written: no helper can ever start. doctor said ok ("no runtime directory yet");
    it fails, with the fix. Run as another user: root writes anywhere."""
    uid, gid = stranger()
    base = Path(tempfile.mkdtemp(prefix="resource-gpu-test-"))
    config_dir = Path(tempfile.mkdtemp(prefix="resource-gpu-test-"))
    try:
        locked = base / f"resource-gpu-{uid}" if made else base
        if made:
            locked.mkdir(mode=0o700)
        for place in {base, locked}:
            os.chown(place, uid, gid)
        locked.chmod(0o500)
        config_dir.chmod(0o755)
        settings = {"machines": plugin.endpoints, "prefix": plugin.prefix}
        config = config_dir / "gpu.yaml"
        config.write_text(json.dumps({"etcd": settings, "resident": True}))
        config.chmod(0o644)
        env = {"PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": str(base), "HOME": str(base)}
        done = subprocess.run(
            [sys.executable, "-c", STRANGER_DOCTOR, str(uid), str(gid), "--config", str(config),
             "doctor", "--json"],
            capture_output=True, env=env, cwd="/", timeout=60,
        )  # fmt: skip
        assert done.stderr.decode().endswith("checks failed: helper\n"), done.stderr.decode()
        [helper] = [f for f in json.loads(done.stdout) if f["check"] == "helper"]
        assert helper["status"] == "fail", helper
        assert (
            f"no helper can start: {locked} exists but this user cannot write"
            in (helper["message"])
        ), helper
        assert "$XDG_RUNTIME_DIR" in helper["fix"] and "resident: false" in helper["fix"]
    finally:
        shutil.rmtree(base)
        shutil.rmtree(config_dir)
