"""Fixtures: one real etcd for the session, an isolated plugin (own prefix) per test, and raw
etcd access to that plugin's keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd_server import shared_server
from tests.etcdkv import Etcd
from tests.plugin import Plugin


@pytest.fixture(scope="session")
def etcd_endpoints() -> Iterator[list[str]]:
    server = shared_server()  # raises (the suite errors, never skips) when etcd cannot start
    try:
        yield server.endpoints
    finally:
        server.stop()


@pytest.fixture
def plugin(etcd_endpoints: list[str], tmp_path: Path) -> Plugin:
    return Plugin(etcd_endpoints, tmp_path)


@pytest.fixture
def etcd(plugin: Plugin) -> Iterator[Etcd]:
    """Raw access to the keys of the test's own plugin installation, for planting and
    corrupting keys and for checking what a call wrote."""
    kv = Etcd(plugin.endpoints, plugin.prefix)
    try:
        yield kv
    finally:
        kv.close()
