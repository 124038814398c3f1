"""What the auditor commands (``history``, ``show``, ``nodes``) need of a resource kind to
print it: they are written once, and each kind supplies its cells and JSON
(``projections.gpu.views`` for GPU)."""

from __future__ import annotations

from typing import Any, Protocol


class KindView(Protocol):
    KINDS: tuple[str, ...]
    """Every change kind its events name (``history --kind`` checks against it)."""
    STATE_HEADERS: tuple[str, ...]
    DETAIL_HEADERS: tuple[str, ...]
    EMPTY: Any
    """The state shown for a node without one (removed, or its record unreadable)."""

    def state_cells(self, state: Any) -> tuple[str, ...]:
        """A state (``None``: no node) as cells under ``STATE_HEADERS``."""
        ...

    def detail_cells(self, state: Any) -> tuple[str, ...]:
        """A state as cells under ``DETAIL_HEADERS``."""
        ...

    def state_json(self, state: Any) -> dict[str, Any]:
        """A state (``None``: no node) as the kind's JSON."""
        ...

    def summary(self, change: Any) -> str | None:
        """One of the kind's own changes in a few words (None: not one of its own)."""
        ...
