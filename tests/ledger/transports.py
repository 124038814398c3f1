"""What the tests of both etcd transports share: which transport a test takes, and a record of
the calls made to a function while the function still runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pytest

Over = Literal["http", "grpc"]
"""The transport a test's calls take (``etcd.transport``)."""


Recorded = list[tuple[Any, ...]]
"""The arguments of each call recorded (``Calls.made``)."""


class Calls:
    """The calls made to ``owner.name`` from now on, each its arguments (those ``when`` takes,
    if given); the function itself still runs."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        owner: object,
        name: str,
        when: Callable[..., bool] | None = None,
    ) -> None:
        self.made: Recorded = []
        original = getattr(owner, name)

        def recorded(*args: Any, **kwargs: Any) -> Any:
            if when is None or when(*args, **kwargs):
                self.made.append(args)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)
