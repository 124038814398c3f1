"""Fixtures: one real etcd for the session, and an isolated plugin (own prefix) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd_server import shared_server
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
