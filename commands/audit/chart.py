"""A node's life as step charts (``history --html``): pure, from the rows ``history`` selects
(each event with the state after it) and what the kind's view measures of a state
(``KindView.measures``). One chart per measure: its capacity as a line, its usage as a filled
area, both steps that change only at an event, over gridlines at round values and times at round
instants; the events the auditor asks about most (compactions, fixes, repairs, adoptions,
removals) ruled across every chart, and every event one tick in a strip, coloured by its kind,
its words on hover, linked to its row in the table.

A chart is as wide as the page: its plot is an SVG stretched to the width (its strokes keep
their width), and its labels are HTML placed by percentages, so nothing needs a script."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from resource_extend.commands.audit.escaping import escape
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.projections.parts import Measure, human

Row = tuple[Event, Any]
"""An event and the node's state after it (``None``: no node)."""

PLOT = 1000
"""The plot's width in its own units (the page stretches it): a time's x, 0 to ``PLOT``."""
HEIGHT = 100
"""A chart's plot height, in pixels."""
STRIP = 26
"""The height of the strip of event ticks, in pixels."""

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

    @property
    def used(self) -> bool:
        """Whether any of it was ever in use (a chart flat at zero is said in one line)."""
        return any(point.usage for point in self.points)


Measured = dict[str, Measure]
"""A state's measures by chart, in the view's order."""


def measured(rows: Sequence[Row], measures: Callable[[Any], list[Measure]]) -> list[Measured]:
    """The measures of each row's state, worked out once for the charts and the table."""
    return [{measure.chart: measure for measure in measures(state)} for _, state in rows]


def series(rows: Sequence[Row], measured: Sequence[Measured]) -> list[Series]:
    """A series per measure any state of ``rows`` has (``measured``: theirs, row by row), in
    the view's order: a measure that first appears later (a volume added) goes after its
    neighbour in that state's list."""
    order: list[str] = []
    units: dict[str, str] = {}
    for each in measured:
        before = -1
        for chart, measure in each.items():
            if chart not in units:
                units[chart] = measure.unit
                order.insert(before + 1, chart)
            before = order.index(chart)

    def point(event: Event, measure: Measure | None) -> Point:
        capacity, usage = (measure.capacity, measure.usage) if measure else (0, 0)
        return Point(event.seq, audit.written_at(event), capacity, usage)

    return [
        Series(
            chart,
            units[chart],
            [point(e, each.get(chart)) for (e, _), each in zip(rows, measured, strict=True)],
        )
        for chart in order
    ]


class Tick(NamedTuple):
    """A time on the charts' axis: where (a percentage of the plot's width) and its label; its
    date where the date is news (the first tick, and each that falls on a new day)."""

    percent: float
    time: str
    date: str | None


_STEPS = (
    *(timedelta(milliseconds=n) for n in (1, 2, 5, 10, 20, 50, 100, 200, 500)),
    *(timedelta(seconds=n) for n in (1, 2, 5, 10, 15, 30)),
    *(timedelta(minutes=n) for n in (1, 2, 5, 10, 15, 30)),
    *(timedelta(hours=n) for n in (1, 2, 3, 6, 12)),
    *(timedelta(days=n) for n in (1, 2, 7, 14, 28, 91, 182, 364)),
)
"""The round steps between time ticks, shortest first."""
_EPOCH = datetime(2026, 1, 5, tzinfo=timezone.utc)
"""Where ticks are counted from: a Monday at midnight, so a week's ticks fall on Mondays."""


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

    def fraction(self, at: datetime) -> float:
        whole = (self.end - self.start).total_seconds()
        return min(max((at - self.start).total_seconds() / whole, 0.0), 1.0)

    def x(self, at: datetime) -> float:
        return PLOT * self.fraction(at)

    def ticks(self, most: int = 6) -> list[Tick]:
        """Times at a round step, at most ``most`` of them (at least 2 where a step fits)."""
        whole = self.end - self.start
        step = next((s for s in _STEPS if whole / s <= most), _STEPS[-1])
        first = _EPOCH + step * -((_EPOCH - self.start) // step)  # the first multiple in span
        times = []
        at = first
        while at <= self.end:
            times.append(at)
            at += step
        if not times:  # shorter than a millisecond
            times = [self.start]
        ticks: list[Tick] = []
        for at in times:
            date = at.strftime("%Y-%m-%d")
            news = not ticks or date != times[len(ticks) - 1].strftime("%Y-%m-%d")
            ticks.append(Tick(100 * self.fraction(at), _clock(at, step), date if news else None))
        return ticks


def _clock(at: datetime, step: timedelta) -> str:
    """A tick's time, to the precision its step needs (a day's step: midnight, so no time)."""
    if step >= timedelta(days=1):
        return ""
    if step >= timedelta(minutes=1):
        return at.strftime("%H:%M")
    if step >= timedelta(seconds=1):
        return at.strftime("%H:%M:%S")
    return at.strftime("%H:%M:%S.%f")[:-3]


BYTES = ("B", "B/s")
"""The units counted in bytes: written as eru writes sizes; any other is a plain count."""


def figure(value: int, unit: str) -> str:
    """A value as the page writes it: bytes (``B``, ``B/s``) in eru's binary units, as the
    table writes them (``1.5T``, ``100M/s``); a count bare (``1,000``: its unit is in the
    caption)."""
    if unit not in BYTES:
        return f"{value:,}"
    return human(value) + unit[1:] if value else "0"


_POWERS_OF_TWO = tuple(1 << power for power in range(80))
_ROUND_COUNTS = tuple(n * 10**power for power in range(25) for n in (1, 2, 5))


def levels(top: int, unit: str, most: int = 5) -> list[int]:
    """The gridlines' values, 0 to at least ``top``, at most ``most`` steps: a round count (1,
    2 or 5 times a power of ten), or for bytes a power of two (so ``512G``, ``1T``)."""
    top = max(top, 1)
    steps = _POWERS_OF_TWO if unit in BYTES else _ROUND_COUNTS
    step = next(step for step in steps if -(-top // step) <= most)
    return [step * index for index in range(-(-top // step) + 1)]


def now_words(drawn: Series) -> str:
    """A chart's caption: its last point, ``now: 3 of 8 cards used``, ``now: 10G of 1T
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


def chart_html(drawn: Series, span: Span, ruled: Sequence[tuple[Event, str]]) -> str:
    """One chart, as wide as the page: capacity a line, usage an area, gridlines labelled on
    the left, times below, ``ruled`` events (with their summaries) ruled across it."""
    grid = levels(max(max(p.capacity, p.usage) for p in drawn.points), drawn.unit)
    top = grid[-1]

    def y(value: int) -> float:
        return HEIGHT * (1 - min(max(value / top, 0.0), 1.0))

    capacity = _steps([(span.x(p.at), y(p.capacity)) for p in drawn.points])
    usage = _steps([(span.x(p.at), y(p.usage)) for p in drawn.points])
    start = span.x(drawn.points[0].at)
    svg = [
        f'<svg class="chart" viewBox="0 0 {PLOT} {HEIGHT}" preserveAspectRatio="none" '
        f'role="img" aria-label="{escape(drawn.chart)}">',
        *(
            f'<line class="{"axis" if level == 0 else "grid"}" x1="0" y1="{y(level):g}" '
            f'x2="{PLOT}" y2="{y(level):g}"/>'
            for level in grid
        ),
        f'<path class="usage" d="{usage}V{HEIGHT}H{start:.1f}Z"/>',
        f'<path class="capacity" d="{capacity}"/>',
        *(_mark(event, summary, span, 0, HEIGHT) for event, summary in ruled),
        "</svg>",
    ]
    labels = "".join(
        f'<span class="level" style="bottom:{100 * level / top:.2f}%">'
        f"{escape(figure(level, drawn.unit))}</span>"
        for level in grid
    )
    return (
        f'<figure><figcaption><b>{escape(drawn.chart)}</b> <span class="now">'
        f"{escape(now_words(drawn))}</span></figcaption>"
        f'<div class="plot" style="height:{HEIGHT}px">{labels}{"".join(svg)}</div>'
        f"{times_html(span)}</figure>"
    )


def strip_html(events: Sequence[tuple[Event, str]], span: Span) -> str:
    """Every event a tick, coloured by its kind, in one strip above the charts."""
    marks = "".join(_mark(event, summary, span, 2, STRIP) for event, summary in events)
    return (
        f'<div class="plot strip" style="height:{STRIP}px">'
        '<span class="level" style="bottom:30%">events</span>'
        f'<svg class="strip" viewBox="0 0 {PLOT} {STRIP}" preserveAspectRatio="none" '
        f'role="img" aria-label="events">'
        f'<line class="axis" x1="0" y1="{STRIP}" x2="{PLOT}" y2="{STRIP}"/>{marks}</svg></div>'
    )


def _steps(points: Sequence[tuple[float, float]]) -> str:
    """An SVG path through ``points`` as steps (level until the next point), on to the right
    edge: one move, then a turn only where the value changes."""
    x0, y0 = points[0]
    path, level = [f"M{x0:.1f} {y0:.1f}"], y0
    for x, y in points[1:]:
        if y != level:
            path.append(f"H{x:.1f}V{y:.1f}")
            level = y
    path.append(f"H{PLOT}")
    return "".join(path)


def times_html(span: Span) -> str:
    """The span's round times under a chart, each with its date where the date is news."""
    return (
        '<div class="times">'
        + "".join(
            f'<span style="left:{tick.percent:.2f}%">'
            + "<br>".join(filter(None, (tick.time, tick.date and f"<i>{tick.date}</i>")))
            + "</span>"
            for tick in span.ticks()
        )
        + "</div>"
    )
