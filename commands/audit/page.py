"""A node's life as one self-contained HTML page (``history --html``): pure, from what
``history`` selected. Everything is inline (SVG and CSS, no script, nothing fetched), so the
page opens offline and can be attached to an audit record; it prints too.

From the top: whose page it is and what it covers, ``verify``'s verdict on the stream, the kinds
of event and their colours, every event as a tick on one strip, a step chart per measure of
the node (``chart``), and the events as a table, each row the target of its marks' links."""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from datetime import datetime
from html import escape
from typing import TYPE_CHECKING, NamedTuple

from resource_extend.commands.audit import chart
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.events import AnyEvent as Event

if TYPE_CHECKING:
    from resource_extend.projections.parts import KindView

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


class Page(NamedTuple):
    """What one page shows."""

    program: str
    node: str
    rows: Sequence[chart.Row]
    """The events selected, each with the state after it: the strip and the table."""
    charted: Sequence[chart.Row]
    """Every event from the first selected to the last (``--kind`` selects fewer): the charts."""
    verdict: Verdict
    notes: Sequence[str]
    """Said under the title: what was selected, what was compacted away."""
    written: datetime
    version: str


def render(page: Page, view: KindView, summary: Callable[[Event], str]) -> str:
    """The page, as one HTML document."""
    said = {event.seq: summary(event) for event, _ in page.rows}  # all that is marked or listed
    title = f"{page.program}: node {page.node}"
    body = [
        f"<h1>{escape(title)}</h1>",
        _covers(page),
        *(f'<p class="note">{escape(note)}</p>' for note in page.notes),
        _verdict(page.verdict),
    ]
    if page.rows:
        body += [_legend(page.rows), *_charts(page, view, said)]
    else:
        body.append('<p class="none">No events match.</p>')
    body.append(_table(page.rows, view, said))
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


def _legend(rows: Sequence[chart.Row]) -> str:
    """The kinds of event on the page, each with its colour and how many there are."""
    counts = collections.Counter(event.kind for event, _ in rows)  # in order of first seen
    items = "".join(
        f'<li><span class="swatch" style="background:{COLOURS.get(kind, OTHER)}"></span>'
        f"{escape(kind)} {count:,}</li>"
        for kind, count in counts.items()
    )
    return f'<ul class="legend">{items}</ul>'


def _charts(page: Page, view: KindView, said: dict[int, str]) -> list[str]:
    span = chart.Span.of(page.charted)
    marks = [(event, said[event.seq]) for event, _ in page.rows]
    ruled = [(event, words) for event, words in marks if event.kind in chart.RULED]
    drawn = [chart.strip_svg(marks, span)]
    for series in chart.series(page.charted, view.measures):
        drawn.append(
            f'<figure><figcaption><b>{escape(series.chart)}</b> <span class="now">'
            f"{escape(chart.now_words(series))}</span></figcaption>"
            f"{chart.chart_svg(series, span, ruled)}</figure>"
        )
    return ['<section class="charts">', *drawn, "</section>"]


def _table(rows: Sequence[chart.Row], view: KindView, said: dict[int, str]) -> str:
    after = [f"{header} AFTER" for header in view.STATE_HEADERS]
    headers = ["SEQ", "AT (UTC)", "VERB", "KIND", "OP", "BY", "CHANGE", *after]
    head = "".join(f"<th>{escape(header)}</th>" for header in headers)
    body = []
    for event, state in rows:
        cells = (
            str(event.seq),
            audit.rfc3339(audit.written_at(event)),
            event.verb,
            event.kind,
            event.op,
            event.by or "",
            said[event.seq],
            *view.state_cells(state),
        )
        shown = "".join(f"<td>{escape(cell)}</td>" for cell in cells)
        body.append(f'<tr id="e{event.seq}" class="k-{event.kind}">{shown}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _style() -> str:
    kinds = "".join(
        f".k-{kind}{{stroke:{colour}}}tr.k-{kind} td:first-child{{border-left-color:{colour}}}"
        for kind, colour in COLOURS.items()
    )
    return STYLE + kinds


STYLE = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#17202a}"
    "h1{font-size:20px;margin:0 0 4px}"
    ".covers,.note{margin:2px 0;color:#424949}"
    ".verdict{margin:10px 0;padding:8px 12px;border-radius:4px;font-weight:600}"
    ".verdict ul{margin:4px 0 0;font-weight:400}"
    ".agrees{background:#e9f7ef;border:1px solid #1b7f3b}"
    ".disagrees{background:#fdedec;border:1px solid #c0392b}"
    ".legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px}"
    ".swatch{display:inline-block;width:10px;height:10px;margin-right:4px}"
    "figure{margin:8px 0}figcaption{margin-left:84px}.now{color:#566573}"
    "svg{max-width:100%;height:auto}svg line{stroke:" + OTHER + ";stroke-width:2}"
    "svg .axis{stroke:#909497;stroke-width:1}svg .grid{stroke:#d5d8dc;stroke-width:1}"
    ".chart line[class^=k-]{stroke-dasharray:3 2;stroke-width:1.5}"
    ".capacity{fill:none;stroke:#17202a;stroke-width:1.5}"
    ".usage{fill:#aed6f1;stroke:#2874a6;stroke-width:1}"
    "text{font-size:11px;fill:#424949}.figure{text-anchor:end}"
    "table{border-collapse:collapse;margin-top:16px;font-size:12px;width:100%}"
    "th,td{border-bottom:1px solid #e5e7e9;padding:2px 6px;text-align:left;vertical-align:top}"
    "td:nth-child(5){word-break:break-all}"  # an op id: hex without a place to break
    "td:first-child{border-left:4px solid " + OTHER + "}td:nth-child(2){white-space:nowrap}"
    "tr:target{background:#fef9e7}"
    "@media print{body{margin:0;font-size:10px}"
    "*{print-color-adjust:exact;-webkit-print-color-adjust:exact}"
    "figure,tr{break-inside:avoid}thead{display:table-header-group}"
    "a{color:inherit;text-decoration:none}}"
)
