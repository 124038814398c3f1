"""A node's life as one self-contained HTML page (``history --html``): pure, from what
``history`` selected. Everything is inline (SVG and CSS, no script, nothing fetched), so the
page opens offline and can be attached to an audit record; it prints too.

From the top: whose page it is and what it covers, ``verify``'s verdict on the stream, where the
events were read and who made the page, the kinds of event and their colours, the span in
figures (``tally``), every event as a tick on one strip, a step chart per measure ever in use
(``chart``; those never used in one line), and the events as a table, each row the target of
its marks' links, with the state after only where it changed."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple

from resource_extend.commands.audit import chart, tally
from resource_extend.commands.audit.escaping import escape
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.events import AnyEvent as Event

if TYPE_CHECKING:
    from resource_extend.projections.parts import KindView, Measure

COLOURS = {
    "node_added": "#1b7f3b",
    "adopted": "#8e44ad",
    "capacity_set": "#0b6e99",
    "capacity_changed": "#2e86c1",
    "usage_changed": "#9aa5b1",
    "usage_set": "#d68910",
    "node_info_set": "#b9770e",
    "usage_rebuilt": "#c0392b",
    "node_removed": "#17202a",
    "checkpoint": "#6c3483",
    "head_repaired": "#e67e22",
}
"""Each kind of event's colour, on the strip, across the charts and beside its row."""
OTHER = "#566573"
"""The colour of a kind not in ``COLOURS`` (a kind of the tests' own)."""


class Verdict(NamedTuple):
    """What ``verify`` found of the node as the page was written."""

    agrees: bool
    findings: list[str]


class Source(NamedTuple):
    """Where the page's events were read, and by whom and how it was made: for the record."""

    etcd: Sequence[str]
    prefix: str
    keys: str
    command: str
    made_by: str


class Page(NamedTuple):
    """What one page shows."""

    program: str
    node: str
    rows: Sequence[chart.Row]
    """The events selected, each with the state after it: the strip and the table."""
    charted: Sequence[chart.Row]
    """Every event from the first selected to the last (``--kind`` selects fewer): the charts
    and the summary."""
    verdict: Verdict
    notes: Sequence[str]
    """Said under the title: what was selected, what was compacted away."""
    written: datetime
    version: str
    source: Source


WHO = (
    "BY is the account that ran the plugin (user@host, from the process's uid, never from the "
    "environment). eru core sends no workload or request id, so every event core caused names "
    "core's own account; to find an event in core's log, match its node, verb and time. OP is "
    "the id the plugin drew for the write (a write resumed after a lost answer keeps it); core "
    "never sees it."
)
"""What the table's BY and OP mean, said above it (docs/auditing.md says it too)."""


def render(page: Page, view: KindView, summary: Callable[[Event], str]) -> str:
    """The page, as one HTML document."""
    said = {event.seq: summary(event) for event, _ in page.rows}  # all that is marked or listed
    title = f"{page.program}: node {page.node}"
    body = [
        f"<h1>{escape(title)}</h1>",
        _covers(page),
        *(f'<p class="note">{escape(note)}</p>' for note in page.notes),
        _verdict(page.verdict),
        source_html(page.source),
    ]
    measured = chart.measured(page.charted, view.measures)
    if page.rows:
        drawn = chart.series(page.charted, measured)
        body += [_legend(page.rows, drawn), _summary(page, drawn), *_charts(page, drawn, said)]
    else:
        body.append('<p class="none">No events match.</p>')
    after = {event.seq: each for (event, _), each in zip(page.charted, measured, strict=True)}
    body += [f'<p class="who">{escape(WHO)}</p>', _table(page.rows, view, said, after)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_style()}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def counted(events: int) -> str:
    """``1 event``, ``10,000 events``."""
    return f"{events:,} event{'s' * (events != 1)}"


def _covers(page: Page) -> str:
    """What the page covers: its events, their times, when and by what it was written."""
    written = f"written {audit.rfc3339(page.written)} by {page.program} {page.version}"
    if not page.rows:
        return f'<p class="covers">{escape(written)}</p>'
    first, last = page.rows[0][0], page.rows[-1][0]
    times = f"{audit.rfc3339(audit.written_at(first))} to {audit.rfc3339(audit.written_at(last))}"
    count = counted(len(page.rows))
    return (
        f'<p class="covers">{count}, seq {first.seq} to {last.seq}, from {escape(times)} '
        f"(UTC) · {escape(written)}</p>"
    )


def _verdict(verdict: Verdict) -> str:
    if verdict.agrees and not verdict.findings:
        return '<div class="verdict agrees">verify: the head agrees with the stream</div>'
    said = "".join(f"<li>{escape(finding)}</li>" for finding in verdict.findings)
    if verdict.agrees:
        return f'<div class="verdict agrees">verify: agrees, noting<ul>{said}</ul></div>'
    return f'<div class="verdict disagrees">verify: disagrees<ul>{said}</ul></div>'


def source_html(source: Source) -> str:
    """Where the events were read and how the page was made, as a record names its source."""
    items = (
        ("etcd", ", ".join(source.etcd)),
        ("prefix", source.prefix),
        ("keys", source.keys),
        ("command", source.command),
        ("made by", source.made_by),
    )
    shown = "".join(f"<dt>{name}</dt><dd>{escape(value)}</dd>" for name, value in items)
    return f'<dl class="source">{shown}</dl>'


def _legend(rows: Sequence[chart.Row], drawn: Sequence[chart.Series]) -> str:
    """The kinds of event on the page, each with its colour and how many there are; how sizes
    are written, where there are any."""
    counts = collections.Counter(event.kind for event, _ in rows)  # in order of first seen
    items = "".join(
        f'<li><span class="swatch" style="background:{COLOURS.get(kind, OTHER)}"></span>'
        f"{escape(kind)} {count:,}</li>"
        for kind, count in counts.items()
    )
    if any(series.unit in chart.BYTES for series in drawn):
        items += f'<li class="units">{SIZES}</li>'
    return f'<ul class="legend">{items}</ul>'


SIZES = "sizes as eru writes them: 1K = 1,024 bytes, 1M = 1,024K, 1G = 1,024M, 1T = 1,024G"


def _summary(page: Page, drawn: Sequence[chart.Series]) -> str:
    """The span in figures: each measure's capacity now, its peak, its mean over time and its
    time at capacity; the events of each verb."""
    head = "".join(
        f"<th>{name}</th>"
        for name in ("MEASURE", "CAPACITY NOW", "PEAK USED", "MEAN USED", "AT CAPACITY")
    )
    rows = []
    for found in (tally.tally(series) for series in drawn if series.used):
        mean = (
            chart.figure(round(found.mean), found.unit)
            if found.unit in chart.BYTES
            else f"{found.mean:,.1f}"
        )
        share = found.full / found.span if found.span else 0.0
        cells = (
            found.chart,
            chart.figure(found.capacity, found.unit),
            f"{chart.figure(found.peak, found.unit)} at {audit.rfc3339(found.peak_at)}",
            mean,
            f"{_lasted(found.full)} ({share:.0%})",
        )
        rows.append("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>")
    verbs = " · ".join(f"{verb} {count:,}" for verb, count in tally.per_verb(page.charted).items())
    return (
        '<section class="summary"><h2>Over these events</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="verbs">events per verb: {escape(verbs)}</p></section>'
    )


def _lasted(took: timedelta) -> str:
    """A duration in its two largest units: ``0 s``, ``3.2 s``, ``4 min 10 s``, ``2 d 5 h``."""
    seconds = took.total_seconds()
    if seconds < 60:
        return f"{seconds:.3g} s" if seconds else "0 s"
    minutes, second = divmod(int(seconds), 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    if days:
        return f"{days} d {hour} h"
    if hours:
        return f"{hours} h {minute} min"
    return f"{minutes} min {second} s"


def _charts(page: Page, drawn: Sequence[chart.Series], said: dict[int, str]) -> list[str]:
    """The strip of every event, a chart per measure that was ever in use, and one line for
    those never used."""
    span = chart.Span.of(page.charted)
    marks = [(event, said[event.seq]) for event, _ in page.rows]
    ruled = [(event, words) for event, words in marks if event.kind in chart.RULED]
    shown = [chart.strip_html(marks, span)]
    shown += [chart.chart_html(series, span, ruled) for series in drawn if series.used]
    idle = [
        f"{series.chart} (of {chart.figure(max(p.capacity for p in series.points), series.unit)})"
        for series in drawn
        if not series.used
    ]
    if idle:
        shown.append(f'<p class="idle">never used over these events: {escape(", ".join(idle))}</p>')
    return ['<section class="charts">', *shown, "</section>"]


def _table(
    rows: Sequence[chart.Row],
    view: KindView,
    said: dict[int, str],
    measured: dict[int, chart.Measured],
) -> str:
    """The events, one row each: ids short (whole on hover), cells that do not wrap but for
    what changed, and the state after only where it changed from the row above (each row's
    measures, by seq, as the charts worked them out: ``measured``)."""
    headers = ["SEQ", "AT (UTC)", "VERB", "KIND", "OP", "BY", "CHANGE", "AFTER, WHERE CHANGED"]
    head = "".join(f"<th>{escape(header)}</th>" for header in headers)
    body = []
    before: chart.Measured | None = None
    for event, state in rows:
        now = measured[event.seq]
        at = audit.rfc3339(audit.written_at(event))
        cells = (
            f"<td>{event.seq}</td>",
            f'<td title="{at}">{_shorter_time(at)}</td>',  # (digits and punctuation of ours)
            f"<td>{escape(event.verb)}</td>",
            f"<td>{escape(event.kind)}</td>",
            f'<td class="id" title="{escape(event.op)}">{escape(event.op[:8])}</td>',
            f"<td>{escape(event.by or '')}</td>",
            f'<td class="change">{escape(said[event.seq])}</td>',
            _after(now, before, view.state_cells(state), view),
        )
        body.append(f'<tr id="e{event.seq}" class="k-{event.kind}">{"".join(cells)}</tr>')
        before = now
    listed = "".join(body)
    return f'<table class="events"><thead><tr>{head}</tr></thead><tbody>{listed}</tbody></table>'


def _shorter_time(at: str) -> str:
    """``2026-12-06T16:11:22.350398Z`` as ``2026-12-06 16:11:22.350`` (to the millisecond)."""
    day, _, clock = at.partition("T")
    whole, _, fraction = clock.rstrip("Z").partition(".")
    return f"{day} {whole}" + (f".{fraction[:3]}" if fraction else "")


def _after(
    now: dict[str, Measure],
    before: dict[str, Measure] | None,
    whole: Sequence[str],
    view: KindView,
) -> str:
    """The measures that changed (all of them on the first row), each ``used of capacity``;
    the whole state on hover."""
    hover = escape(" · ".join(f"{h}: {c}" for h, c in zip(view.STATE_HEADERS, whole, strict=True)))
    if not now:
        shown = "" if before is not None and not before else '<span class="m">no node</span>'
    else:
        changed = [m for chart_, m in now.items() if before is None or before.get(chart_) != m]
        shown = "".join(
            f'<span class="m">{escape(m.chart)} {chart.figure(m.usage, m.unit)} of '
            f"{chart.figure(m.capacity, m.unit)}</span>"  # (figures: digits and the view's unit)
            for m in changed
        )
    return f'<td class="after" title="{hover}">{shown}</td>'


def _style() -> str:
    kinds = "".join(
        f".k-{kind}{{stroke:{colour}}}.events tr.k-{kind} td:first-child"
        f"{{border-left-color:{colour}}}"
        for kind, colour in COLOURS.items()
    )
    return STYLE + kinds


SOURCE_STYLE = (
    ".source{display:grid;grid-template-columns:max-content 1fr;gap:0 12px;margin:6px 0;"
    "font-size:12px;color:#424949}.source dt{font-weight:600}.source dd{margin:0;"
    "font-family:ui-monospace,monospace;overflow-wrap:anywhere}"
)
"""How the source (``source_html``) is set, on a node's page and the fleet's index alike."""

STYLE = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#17202a}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:14px 0 4px}"
    ".covers,.note{margin:2px 0;color:#424949}"
    ".verdict{margin:10px 0;padding:8px 12px;border-radius:4px;font-weight:600}"
    ".verdict ul{margin:4px 0 0;font-weight:400}"
    ".agrees{background:#e9f7ef;border:1px solid #1b7f3b}"
    ".disagrees{background:#fdedec;border:1px solid #c0392b}"
    + SOURCE_STYLE
    + ".legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px}"
    ".legend .units{color:#566573}"
    ".swatch{display:inline-block;width:10px;height:10px;margin-right:4px}"
    ".verbs,.idle,.who{color:#424949;margin:4px 0}"
    "figure{margin:10px 0 0}figcaption{margin-left:84px}.now{color:#566573}"
    ".plot{position:relative;margin:4px 48px 0 84px}"
    ".plot svg{position:absolute;left:0;top:0;width:100%;height:100%;overflow:visible}"
    ".plot .level{position:absolute;right:100%;margin-right:6px;transform:translateY(50%);"
    "font-size:11px;color:#424949;white-space:nowrap}"
    ".times{position:relative;margin:0 48px 0 84px;height:30px;font-size:11px;color:#424949}"
    ".times span{position:absolute;top:2px;transform:translateX(-50%);white-space:nowrap;"
    "text-align:center;line-height:1.25}.times i{font-style:normal;color:#7b7d7d}"
    "svg *{vector-effect:non-scaling-stroke}svg line{stroke:" + OTHER + ";stroke-width:2}"
    "svg .axis{stroke:#909497;stroke-width:1}svg .grid{stroke:#e5e7e9;stroke-width:1}"
    ".chart line[class^=k-]{stroke-dasharray:3 2;stroke-width:1.5}"
    ".capacity{fill:none;stroke:#17202a;stroke-width:1.5}"
    ".usage{fill:#aed6f1;stroke:#2874a6;stroke-width:1}"
    "table{border-collapse:collapse;font-size:12px}"
    "th,td{border-bottom:1px solid #e5e7e9;padding:2px 6px;text-align:left;vertical-align:top}"
    "th{white-space:nowrap}.summary td{white-space:nowrap}"
    ".events{margin-top:8px;width:100%}"
    ".events td{white-space:nowrap}.events td.change{white-space:normal;min-width:16em}"
    ".events td.after{white-space:normal}"
    ".events .m{display:inline-block;white-space:nowrap;margin-right:12px}"
    ".events .id{font-family:ui-monospace,monospace}"
    ".events td:first-child{border-left:4px solid " + OTHER + "}"
    "tr:target{background:#fef9e7}"
    "@media print{body{margin:0;font-size:10px}"
    "*{print-color-adjust:exact;-webkit-print-color-adjust:exact}"
    "figure,tr{break-inside:avoid}thead{display:table-header-group}"
    "a{color:inherit;text-decoration:none}}"
)
