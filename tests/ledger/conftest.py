"""The transport parameter of the tests that run over both (``tests.ledger.transports``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.etcd_server import Cluster
from tests.ledger.transports import Over


@pytest.fixture(params=["http", "grpc"])
def over(request: pytest.FixtureRequest) -> Over:
    """The transport the test's calls take."""
    kind: Over = request.param
    return kind


@pytest.fixture
def member() -> Iterator[Cluster]:
    """A one-member etcd of the test's own (it may kill and restart it)."""
    cluster = Cluster(1).start()
    yield cluster
    cluster.stop()
