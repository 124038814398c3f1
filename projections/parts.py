"""A kind's heavy parts (:class:`Parts`), and what the shell asks of the ones it prints.

Loaded on a kind's first use of one (``Plugin.parts``), never by core's thin calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from resource_extend.ledger.model.contract import Kind
from resource_extend.projections.metrics import Gauge, MetricDescription, Sample

_UNITS = ((50, "P"), (40, "T"), (30, "G"), (20, "M"), (10, "K"))


def human(size: int) -> str:
    """Bytes for people, in the binary units eru reads (``1G`` is 2**30 bytes): exact where a
    unit divides them (``100G``), else to one decimal (``341.3G``)."""
    for shift, unit in _UNITS:
        if abs(size) >= 1 << shift:
            whole, rest = divmod(abs(size), 1 << shift)
            sign = "-" if size < 0 else ""
            return f"{sign}{whole}{unit}" if not rest else f"{size / (1 << shift):.1f}{unit}"
    return str(size)


class Measure(NamedTuple):
    """One figure of a node's state that its chart follows (``history --html``): the capacity
    of it and the usage of it, counted in ``unit`` (``cards``, ``B``, ``B/s``, ``IOPS``)."""

    chart: str
    """What it is, as the chart is titled: ``H100``, ``volume /data0``, ``/dev/vda read``."""
    unit: str
    capacity: int
    usage: int
    headline: bool = True
    """Whether the fleet's index draws it as a bar (a product, a volume, storage), or only
    the node's page charts it (a disk's quotas)."""


class KindView(Protocol):
    """How the auditor commands (``history``, ``show``, ``nodes``) print a kind: they are
    written once, and each kind supplies its cells and JSON (``projections.gpu.views``)."""

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

    def measures(self, state: Any) -> list[Measure]:
        """What a node's chart follows of a state (``None``: no node; nothing), in the order
        the charts are drawn."""
        ...


class KindGauges(Protocol):
    """What a kind gives the exporter (``projections.gpu.metrics``): its gauges, and a
    node's values of them."""

    GAUGES: tuple[Gauge, ...]

    def gauges(self, state: Any) -> list[Sample]: ...


class Parts(NamedTuple):
    """A kind's heavy parts, loaded when a command first needs one."""

    fold: Kind[Any]
    """What the ledger asks of the kind: its events, its fold, its node record."""
    view: KindView
    gauges: KindGauges
    metrics: Sequence[MetricDescription]
    """The metrics core exports for each node (``get-metrics-description``)."""
