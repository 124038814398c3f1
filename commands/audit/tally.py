"""What a page's span adds up to (``history --html``'s summary): pure, from the charts' series
and the rows. Per measure its peak, its mean over time and its time at capacity; per verb its
events. A value holds from its event to the next, so the mean weighs each by how long it held
(the last, which held for no time yet, counts where the span is one instant)."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from resource_extend.commands.audit.chart import Row, Series


class Tally(NamedTuple):
    """One measure over the span."""

    chart: str
    unit: str
    capacity: int
    """Its capacity after the last event."""
    peak: int
    peak_at: datetime
    """When usage first reached its peak."""
    mean: float
    """Usage, weighted by how long each value held."""
    full: timedelta
    """How long usage stood at capacity (a capacity of 0 is never full)."""
    span: timedelta


def tally(drawn: Series) -> Tally:
    points = drawn.points
    peak = max(points, key=lambda point: point.usage)  # the first of the highest
    held = [(point, following.at - point.at) for point, following in itertools.pairwise(points)]
    span = points[-1].at - points[0].at
    if span > timedelta(0):
        mean = (
            sum(point.usage * took.total_seconds() for point, took in held) / span.total_seconds()
        )
    else:
        mean = float(points[-1].usage)
    full = sum((took for point, took in held if 0 < point.capacity <= point.usage), timedelta(0))
    return Tally(
        drawn.chart, drawn.unit, points[-1].capacity, peak.usage, peak.at, mean, full, span
    )


def per_verb(rows: Sequence[Row]) -> dict[str, int]:
    """How many events each verb wrote, most first (ties in order of first seen)."""
    counted = collections.Counter(event.verb for event, _ in rows)
    return dict(counted.most_common())
