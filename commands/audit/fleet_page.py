"""The fleet as one self-contained HTML page (``nodes --html DIR``'s index.html): pure, from a row
per node. Like a node's page (``page``) it holds everything inline, no script and nothing
fetched, and prints.

From the top: whose fleet and how many nodes, how many are full and how many disagree with
their stream, where the nodes were read and who made the page, then a row a node: its name
(linked to its own page beside the index), its usage now as a bar per product or volume,
``verify``'s verdict, its last change and who made it, its events. Nodes that disagree come
first, then full ones, then the rest by name."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple
from urllib.parse import quote

from resource_extend.commands.audit import chart
from resource_extend.commands.audit.escaping import escape
from resource_extend.commands.audit.page import SOURCE_STYLE, Source, Verdict, source_html
from resource_extend.ledger.model import audit
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.projections.parts import Measure


class Node(NamedTuple):
    """One node's row."""

    name: str
    page: str
    """Its page's file name, beside the index."""
    status: str
    """As ``nodes`` says it: live, removed, upstream, ..."""
    measures: Sequence[Measure]
    """Its usage now, the headline measures (``Measure.headline``) of its head."""
    verdict: Verdict
    last: Event | None
    """Its last event (``None``: it has none, an upstream record not adopted yet)."""
    events: int


class Fleet(NamedTuple):
    """What the index shows."""

    program: str
    nodes: Sequence[Node]
    written: datetime
    version: str
    source: Source
    selected: str
    """What was selected (``--match``), as the options said it; empty: every node."""


def full(node: Node) -> bool:
    """Whether any product or volume of the node is used to its capacity."""
    return any(0 < measure.capacity <= measure.usage for measure in node.measures)


def ordered(nodes: Sequence[Node]) -> list[Node]:
    """Those that disagree with their stream first, then full ones, then the rest; by name
    within each, its numbers in numeric order."""
    return sorted(
        nodes, key=lambda node: (node.verdict.agrees, not full(node), _natural(node.name))
    )


def _natural(name: str) -> list[tuple[int, str]]:
    """A name's order as people count: ``gpu-2`` before ``gpu-10``."""
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", name)]


def render(fleet: Fleet) -> str:
    """The index, as one HTML document."""
    count = len(fleet.nodes)
    title = f"{fleet.program}: the fleet, {count:,} node{'s' * (count != 1)}"
    disagree = sum(not node.verdict.agrees for node in fleet.nodes)
    filled = sum(full(node) for node in fleet.nodes)
    written = f"written {audit.rfc3339(fleet.written)} by {fleet.program} {fleet.version}"
    tally = f"{disagree:,} disagree with their stream · {filled:,} full · {written}"
    body = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="covers">{escape(tally)}</p>',
        *([f'<p class="note">Selected: {escape(fleet.selected)}</p>'] if fleet.selected else []),
        source_html(fleet.source),
        _table(ordered(fleet.nodes)),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="generator" content="{GENERATOR}">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


GENERATOR = "resource-extend nodes --html"
"""The index's generator tag: how a later run knows a directory holds an earlier fleet's
pages, which it may replace."""


def _table(nodes: Sequence[Node]) -> str:
    headers = ("NODE", "STATE", "USAGE NOW", "VERIFY", "LAST CHANGE", "EVENTS")
    head = "".join(f"<th>{header}</th>" for header in headers)
    rows = "".join(_row(node) for node in nodes)
    return f'<table class="fleet"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _row(node: Node) -> str:
    marks = ("disagrees" if not node.verdict.agrees else "") + (" full" if full(node) else "")
    verdict = "agrees" if node.verdict.agrees else "disagrees"
    found = escape("\n".join(node.verdict.findings))
    cells = (
        f'<td class="name"><a href="{quote(node.page)}">{escape(node.name)}</a></td>',
        f"<td>{escape(node.status)}</td>",
        f'<td class="bars">{"".join(map(_bar, node.measures)) or "none"}</td>',
        f'<td class="verdict" title="{found}">{verdict}{_first(node.verdict)}</td>',
        f"<td>{_last(node.last)}</td>",
        f'<td class="count">{node.events:,}</td>',
    )
    return f'<tr class="{marks.strip()}">{"".join(cells)}</tr>'


def _first(verdict: Verdict) -> str:
    """A disagreement's first finding, under the verdict (all of them on hover)."""
    if verdict.agrees or not verdict.findings:
        return ""
    return f'<div class="finding">{escape(verdict.findings[0])}</div>'


def _bar(measure: Measure) -> str:
    """A measure as a bar: the share used, its name and ``used/capacity`` beside it."""
    share = min(measure.usage / measure.capacity, 1.0) if measure.capacity > 0 else 0.0
    used = chart.figure(measure.usage, measure.unit)
    has = chart.figure(measure.capacity, measure.unit)
    level = "full" if 0 < measure.capacity <= measure.usage else ""
    return (
        f'<div class="measure {level}"><span class="bar"><span style="width:{100 * share:.1f}%">'
        f'</span></span><span class="label">{escape(measure.chart)} {escape(used)}/'
        f"{escape(has)}</span></div>"
    )


def _last(event: Event | None) -> str:
    if event is None:
        return "none"
    by = f" by {event.by}" if event.by else ""
    at = audit.rfc3339(audit.written_at(event))
    return f'<span title="{escape(at)}">{escape(at[:19].replace("T", " "))}</span> ' + escape(
        f"{event.verb}{by}"
    )


STYLE = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#17202a}"
    "h1{font-size:20px;margin:0 0 4px}.covers,.note{margin:2px 0;color:#424949}"
    + SOURCE_STYLE
    + "table{border-collapse:collapse;font-size:12px;width:100%;margin-top:10px}"
    "th,td{border-bottom:1px solid #e5e7e9;padding:3px 6px;text-align:left;vertical-align:top;"
    "white-space:nowrap}th{position:sticky;top:0;background:#fff}"
    "td.bars{white-space:normal;width:45%}.count{text-align:right}"
    ".measure{display:inline-flex;align-items:center;gap:6px;margin:1px 14px 1px 0}"
    ".bar{display:inline-block;width:90px;height:9px;background:#eaf2f8;"
    "border:1px solid #aed6f1}.bar span{display:block;height:100%;background:#5dade2}"
    ".measure.full .bar span{background:#c0392b}.measure.full .label{color:#922b21;"
    "font-weight:600}"
    "tr.disagrees td:first-child{border-left:4px solid #c0392b}"
    "tr.full td:first-child{border-left:4px solid #d68910}"
    "td:first-child{border-left:4px solid transparent}"
    "tr.disagrees .verdict{color:#c0392b;font-weight:600;white-space:normal;min-width:22em}"
    ".finding{font-weight:400;color:#424949}"
    "a{color:#1f618d}"
    "@media print{body{margin:0;font-size:10px}"
    "*{print-color-adjust:exact;-webkit-print-color-adjust:exact}"
    "tr{break-inside:avoid}thead{display:table-header-group}th{position:static}}"
)
