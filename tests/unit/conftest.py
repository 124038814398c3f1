"""The pure tests: no etcd, no process; each takes well under a second, its Hypothesis
properties a few. A bound of two minutes still turns a hang into a failure with its stack
long before the suite's own (pyproject.toml's ``timeout``)."""

from __future__ import annotations

import pytest

UNIT_TIMEOUT = 120


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None and "tests/unit/" in item.nodeid:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT))
