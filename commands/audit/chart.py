"""A node's life as step charts (``history --html``), drawn as inline SVG: pure, from the rows
``history`` selects (each event with the state after it) and what the kind's view measures of a
state (``KindView.measures``). One chart per measure: its capacity as a line, its usage as a
filled area, both steps that change only at an event; the events the auditor asks about most
(compactions, fixes, repairs, adoptions, removals) ruled across every chart, and every event one
tick in a strip, coloured by its kind, its words on hover, linked to its row in the table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any, NamedTuple

from resource_extend.ledger.model import audit
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.projections.parts import Measure

Row = tuple[Event, Any]
"""An event and the node's state after it (``None``: no node)."""

WIDTH, HEIGHT = 960, 130
LEFT, RIGHT, TOP, BOTTOM = 84, 16, 10, 22
"""The plot's margins inside a chart: its figures on the left, its times below."""
PLOT = WIDTH - LEFT - RIGHT
STRIP = 34
"""The height of the strip of event ticks."""

RULED = ("checkpoint", "usage_rebuilt", "head_repaired", "adopted", "node_removed")
"""The kinds of event ruled across every chart, not only ticked in the strip."""


class Point(NamedTuple):
    """A measure's value after one event."""

    seq: int
    at: datetime
    capacity: int
    usage: int


class Series(NamedTuple):
    """One chart's points, one per row (0 where the state does not have the measure)."""

    chart: str
    unit: str
    points: list[Point]


def series(rows: Sequence[Row], measures: Callable[[Any], list[Measure]]) -> list[Series]:
    """A series per measure any state of ``rows`` has, in the order they first appear."""
    measured = [{measure.chart: measure for measure in measures(state)} for _, state in rows]
    units: dict[str, str] = {}
    for each in measured:
        for chart, measure in each.items():
            units.setdefault(chart, measure.unit)

    def point(event: Event, measure: Measure | None) -> Point:
        capacity, usage = (measure.capacity, measure.usage) if measure else (0, 0)
        return Point(event.seq, audit.written_at(event), capacity, usage)

    return [
        Series(
            chart,
            unit,
            [point(e, each.get(chart)) for (e, _), each in zip(rows, measured, strict=True)],
        )
        for chart, unit in units.items()
    ]


class Span(NamedTuple):
    """The time the charts cover, from the first event shown to the last: a time's x."""

    start: datetime
    end: datetime

    @classmethod
    def of(cls, rows: Sequence[Row]) -> Span:
        start, end = audit.written_at(rows[0][0]), audit.written_at(rows[-1][0])
        if end <= start:  # one instant
            return cls(start, start + timedelta(seconds=1))
        return cls(start, end + (end - start) / 40)  # room to show the state after the last

    def x(self, at: datetime) -> float:
        whole = (self.end - self.start).total_seconds()
        return LEFT + PLOT * min(max((at - self.start).total_seconds() / whole, 0.0), 1.0)

    def ticks(self, count: int = 5) -> list[tuple[float, str]]:
        """``count`` times spread over the span, each with its x and its label (to the
        minute over days, to the millisecond within a minute)."""
        whole = self.end - self.start
        shown = [self.start + whole * index / (count - 1) for index in range(count)]
        if whole >= timedelta(days=2):
            return [(self.x(at), at.strftime("%Y-%m-%d %H:%M")) for at in shown]
        if whole >= timedelta(minutes=1):
            return [(self.x(at), at.strftime("%Y-%m-%d %H:%M:%S")) for at in shown]
        return [(self.x(at), at.strftime("%H:%M:%S.%f")[:-3]) for at in shown]


_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
BYTES = ("B", "B/s")
"""The units counted in bytes: labelled in binary units; any other is a plain count."""


def figure(value: int, unit: str) -> str:
    """A value as a chart's axis labels it: bytes (``B``, ``B/s``) in binary units to four
    figures (``1.5 TiB``, ``100 MiB/s``), a count bare (``1,000``: its unit is in the caption)."""
    if unit not in BYTES:
        return f"{value:,}"
    scaled, power = float(value), 0
    while abs(scaled) >= 1024 and power < len(_BINARY) - 1:
        scaled, power = scaled / 1024, power + 1
    return f"{scaled:.4g} {_BINARY[power]}{unit[1:]}"


def now_words(drawn: Series) -> str:
    """A chart's caption: its last point, ``now: 3 of 8 cards used``, ``now: 10 GiB of 1 TiB
    used``."""
    last = drawn.points[-1]
    used, has = figure(last.usage, drawn.unit), figure(last.capacity, drawn.unit)
    counted = "" if drawn.unit in BYTES else f" {drawn.unit}"
    return f"now: {used} of {has}{counted} used"


def words(event: Event, summary: str) -> str:
    """An event on hover: its seq, time, verb, kind, op and writer, then what it did."""
    by = f" · by {event.by}" if event.by else ""
    when = audit.rfc3339(audit.written_at(event))
    return f"seq {event.seq} · {when} · {event.verb} · {event.kind} · op {event.op}{by}\n{summary}"


def _mark(event: Event, summary: str, span: Span, low: float, high: float) -> str:
    """An event's mark: a line at its time from ``low`` to ``high``, its words on hover, a link
    to its row in the table."""
    x = f"{span.x(audit.written_at(event)):.1f}"
    line = f'<line x1="{x}" y1="{low}" x2="{x}" y2="{high}" class="k-{event.kind}">'
    return (
        f'<a href="#e{event.seq}">{line}<title>{escape(words(event, summary))}</title></line></a>'
    )


def chart_svg(drawn: Series, span: Span, ruled: Sequence[tuple[Event, str]]) -> str:
    """One chart: capacity a line, usage an area, ``ruled`` events (with their summaries)
    ruled across it."""
    top = max((max(p.capacity, p.usage) for p in drawn.points), default=0) or 1
    highest = figure(top, drawn.unit)
    base = HEIGHT - BOTTOM

    def y(value: int) -> float:
        return base - (base - TOP) * min(max(value / top, 0.0), 1.0)

    capacity = _steps([(span.x(p.at), y(p.capacity)) for p in drawn.points])
    usage = _steps([(span.x(p.at), y(p.usage)) for p in drawn.points])
    start = span.x(drawn.points[0].at)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(drawn.chart)}">',
        f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}"/>',
        f'<line class="grid" x1="{LEFT}" y1="{TOP}" x2="{WIDTH - RIGHT}" y2="{TOP}"/>',
        f'<text class="figure" x="{LEFT - 6}" y="{TOP + 4}">{escape(highest)}</text>',
        f'<text class="figure" x="{LEFT - 6}" y="{base + 4}">0</text>',
        f'<path class="usage" d="{usage}V{base}H{start:.1f}Z"/>',
        f'<path class="capacity" d="{capacity}"/>',
    ]
    parts += [_mark(event, summary, span, TOP, base) for event, summary in ruled]
    parts += _time_labels(span, base + 16)
    parts.append("</svg>")
    return "".join(parts)


def strip_svg(events: Sequence[tuple[Event, str]], span: Span) -> str:
    """Every event a tick, coloured by its kind, in one strip above the charts."""
    parts = [
        f'<svg class="strip" viewBox="0 0 {WIDTH} {STRIP}" width="{WIDTH}" height="{STRIP}" '
        'role="img" aria-label="events">',
        f'<line class="axis" x1="{LEFT}" y1="{STRIP - 4}" x2="{WIDTH - RIGHT}" y2="{STRIP - 4}"/>',
        f'<text class="figure" x="{LEFT - 6}" y="{STRIP / 2 + 4}">events</text>',
    ]
    parts += [_mark(event, summary, span, 4, STRIP - 4) for event, summary in events]
    parts.append("</svg>")
    return "".join(parts)


def _steps(points: Sequence[tuple[float, float]]) -> str:
    """An SVG path through ``points`` as steps (level until the next point), on to the right
    edge: one move, then a turn only where the value changes."""
    x0, y0 = points[0]
    path, level = [f"M{x0:.1f} {y0:.1f}"], y0
    for x, y in points[1:]:
        if y != level:
            path.append(f"H{x:.1f}V{y:.1f}")
            level = y
    path.append(f"H{WIDTH - RIGHT}")
    return "".join(path)


def _time_labels(span: Span, y: float) -> list[str]:
    """The span's times under a chart, the first and last kept within it."""
    ticks = span.ticks()
    anchors = ["start", *["middle"] * (len(ticks) - 2), "end"]
    return [
        f'<text class="time" x="{x:.1f}" y="{y}" text-anchor="{anchor}">{label}</text>'
        for (x, label), anchor in zip(ticks, anchors, strict=True)
    ]
