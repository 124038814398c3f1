"""The shapes of get-metrics-description and get-metrics, shared by every resource kind."""

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
