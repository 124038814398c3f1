"""The shapes of get-metrics-description and get-metrics, and of the exporter's gauges, shared
by every resource kind."""

from __future__ import annotations

import msgspec


class MetricDescription(msgspec.Struct, frozen=True):
    name: str
    help: str
    type: str
    labels: list[str]


class Metric(msgspec.Struct, frozen=True):
    name: str
    labels: list[str]
    key: str
    value: str


def statsd_safe(text: str) -> str:
    """A name as one statsd key segment: its dots become underscores."""
    return text.replace(".", "_")


Gauge = tuple[str, str, tuple[str, ...]]
"""An exporter gauge: its name after the program's prefix, its help, its labels (``nodename``,
which the exporter adds, aside)."""
Sample = tuple[str, tuple[str, ...], float]
"""One value of a gauge: the gauge's name, its labels' values in order, the value."""
