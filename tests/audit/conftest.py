"""What the auditor commands' tests share beyond ``helpers``: a GPU store on the test's etcd, for
the tests that lay a stream down in-process (long ones, or ones a command could not make)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store import Store
from resource_extend.projections.gpu.node import GPU, NodeState
from tests.audit.browser import find_chromium
from tests.plugin import TRANSPORT, Plugin


@pytest.fixture
def store(plugin: Plugin) -> Iterator[Store[NodeState]]:
    """A GPU store on the etcd and prefix ``plugin`` uses, over the suite's transport."""
    settings = EtcdConfig(machines=plugin.endpoints, prefix=plugin.prefix, transport=TRANSPORT)
    opened = Store(settings, GPU)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def chromium() -> str:
    """Where headless Chromium is, for the page tests (``browser``)."""
    return find_chromium()
