"""Raw etcd access to the test's own plugin installation, for planting and corrupting keys."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.etcdkv import Etcd
from tests.plugin import Plugin


@pytest.fixture
def etcd(plugin: Plugin) -> Iterator[Etcd]:
    kv = Etcd(plugin.endpoints, plugin.prefix)
    try:
        yield kv
    finally:
        kv.close()
