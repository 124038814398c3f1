from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.etcdkv import Etcd
from tests.plugin import Plugin


@pytest.fixture
def etcd(plugin: Plugin) -> Iterator[Etcd]:
    """Raw access to the keys of the test's own plugin installation."""
    kv = Etcd(plugin.endpoints, plugin.prefix)
    try:
        yield kv
    finally:
        kv.close()
