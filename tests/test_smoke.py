"""One call written and read back: the first thing to run when anything seems off."""

from __future__ import annotations

import pytest

from tests.plugin import Plugin, R, counts

pytestmark = [pytest.mark.grpc, pytest.mark.resident]


def test_add_then_read(plugin: Plugin) -> None:
    plugin.add("n1", {"nvidia-3090": 4})
    info = plugin.info("n1")
    assert counts(info["capacity"]) == {"nvidia-3090": 4}
    assert counts(info["usage"]) == {}
    assert R(None) is None
