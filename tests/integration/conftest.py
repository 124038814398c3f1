"""A plugin installation shared by a module's read-only table tests (set up once)."""

from __future__ import annotations

import pytest

from tests.plugin import Plugin


@pytest.fixture(scope="module")
def shared_plugin(etcd_endpoints: list[str], tmp_path_factory: pytest.TempPathFactory) -> Plugin:
    return Plugin(etcd_endpoints, tmp_path_factory.mktemp("shared"))
