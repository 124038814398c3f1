"""Fixtures: one real etcd for the session, an isolated plugin (own prefix) per test, and raw
etcd access to that plugin's keys."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from resource_extend.commands.programs import programs
from resource_extend.ledger.etcd import choice
from resource_extend.ledger.etcd.health import HEALTH
from tests.etcd_server import etcd_binary, etcd_notice, in_containers, shared_server
from tests.etcdkv import Etcd
from tests.plugin import Plugin, kill_helpers_for, stop_helpers

collect_ignore = [] if in_containers() else ["test_partitions.py"]
"""The partition tests cut containers apart: they run where etcd runs in containers
(``RESOURCE_GPU_ETCD=docker``, as in CI), and are not collected elsewhere."""


def pytest_report_header() -> list[str]:
    """Which etcd the run starts, and one line when it has a bug the tests can meet."""
    if os.environ.get("ETCD_ENDPOINTS"):
        return [f"etcd: ETCD_ENDPOINTS={os.environ['ETCD_ENDPOINTS']}"]
    notice = etcd_notice()
    return [f"etcd: {etcd_binary()}", *([f"warning: {notice}"] if notice else [])]


@pytest.fixture(scope="session", autouse=True)
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The resident helpers the suite starts live in a runtime directory of the suite's own
    (never the user's), and are all stopped when it ends: nothing is left running."""
    directory = tmp_path_factory.mktemp("run")
    directory.chmod(0o700)
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(directory)
    try:
        yield directory
    finally:
        try:
            for program in programs():
                stop_helpers(program)
        finally:
            kill_helpers_for(str(tmp_path_factory.getbasetemp()))
        if before is None:
            del os.environ["XDG_RUNTIME_DIR"]
        else:
            os.environ["XDG_RUNTIME_DIR"] = before


@pytest.fixture(scope="session")
def etcd_endpoints() -> Iterator[list[str]]:
    server = shared_server()  # raises (the suite errors, never skips) when etcd cannot start
    try:
        yield server.endpoints
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def a_process_of_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process starts each test as a core call in a process of its own does (for
    ``etcd.transport: auto``), whatever a test before it ran in-process (the CLI says it serves
    many calls: ``ledger.etcd.choice``)."""
    monkeypatch.setattr(choice, "PROCESS", choice._Process())
    HEALTH.forget()  # and has seen no member of any cluster answer, nor fail to


@pytest.fixture(autouse=True)
def no_helper_outlives_its_test(tmp_path: Path) -> Iterator[None]:
    """A helper serving a config in the test's own directory ends with the test, whichever
    way the test made its plugin (one helper per config: a suite of them would pile up)."""
    yield
    kill_helpers_for(str(tmp_path))


@pytest.fixture
def plugin(etcd_endpoints: list[str], tmp_path: Path) -> Iterator[Plugin]:
    installation = Plugin(etcd_endpoints, tmp_path)
    yield installation
    installation.stop_helper()  # one helper per config: none outlives its test


@pytest.fixture
def storage(etcd_endpoints: list[str], tmp_path: Path) -> Iterator[Plugin]:
    """A resource-storage installation of the test's own, as upstream's tests configure it:
    ``scheduler.max_deploy_count`` 100."""
    installation = Plugin(
        etcd_endpoints, tmp_path, program="resource-storage", scheduler={"max_deploy_count": 100}
    )
    yield installation
    installation.stop_helper()


@pytest.fixture
def etcd(plugin: Plugin) -> Iterator[Etcd]:
    """Raw access to the keys of the test's own plugin installation, for planting and
    corrupting keys and for checking what a call wrote."""
    kv = Etcd(plugin.endpoints, plugin.prefix)
    try:
        yield kv
    finally:
        kv.close()
