"""The transport parameter of the tests that run over both (``tests.ledger.transports``)."""

from __future__ import annotations

import pytest

from tests.ledger.transports import Over


@pytest.fixture(params=["http", "grpc"])
def over(request: pytest.FixtureRequest) -> Over:
    """The transport the test's calls take."""
    kind: Over = request.param
    return kind
