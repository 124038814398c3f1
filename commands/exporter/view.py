"""The exporter's pure core: what a refresh read (a :class:`View`), what the ledger's events
count (:class:`Tallies`), and the metric families a scrape serves from them.

Nothing here reads etcd or a clock: the refresher (``commands.exporter.refresh``) reads; the
scrape (``commands.exporter.serve``) renders :func:`view_families` once per refresh and
:func:`scrape_families` at each scrape, with prometheus-client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Literal

import msgspec

from resource_extend.projections.metrics import Sample

if TYPE_CHECKING:
    from resource_extend.projections.parts import KindGauges

Point = tuple[tuple[str, ...], float]
"""One sample of a family: its labels' values, in the family's order, and its value."""


NODE_LABEL = "nodename"
"""The node's label, named as in core's own metrics (``gpu_used{podname,nodename,...}``), so
that the two join."""


class NodeSeries(msgspec.Struct, frozen=True):
    """One node as a refresh read it."""

    node: str
    samples: list[Sample]
    """The kind's gauges."""
    events: int
    """Events its stream holds in etcd (a checkpoint counts as one; 0: an upstream record)."""
    last_event_at: float | None
    """When its last event was written, in seconds since the epoch (None: not recorded, as in
    an upstream record or a head written before 0.5)."""


class View(msgspec.Struct, frozen=True):
    """Every node, as one refresh read it (its heads at one revision)."""

    read_at: float
    """``time.monotonic()`` when the read finished: how stale the view is."""
    read_at_wall: float
    """The same, in seconds since the epoch."""
    seconds: float
    """How long the read took."""
    nodes: list[NodeSeries]
    failures: dict[str, int]
    """Writes that gave up, by verb (``ledger.store.tallies``)."""


class Drift(msgspec.Struct, frozen=True):
    """What the last whole verify pass found."""

    read_at: float
    read_at_wall: float
    seconds: float
    nodes: list[str]
    """The nodes whose head disagrees with their stream."""


class Tallies(msgspec.Struct, frozen=True):
    """Events appended since the exporter started, and the compare-and-swaps they lost, by
    verb."""

    appends: dict[str, int] = msgspec.field(default_factory=dict)
    retries: dict[str, int] = msgspec.field(default_factory=dict)

    def plus(self, other: Tallies) -> Tallies:
        return Tallies(_added(self.appends, other.appends), _added(self.retries, other.retries))


class Status(msgspec.Struct, frozen=True):
    """All a scrape serves: replaced whole by the refresher and the verifier, never changed."""

    view: View | None = None
    """The last view read (None: none yet)."""
    up: bool = False
    """The last refresh reached etcd."""
    rendered: bytes = b""
    """``view``'s :func:`view_families` in the text format, rendered once when it was read."""
    drift: Drift | None = None
    tallies: Tallies = msgspec.field(default_factory=Tallies)


class Family(msgspec.Struct, frozen=True):
    """One metric family of a scrape: ``name`` whole (a counter's without ``_total``)."""

    name: str
    help: str
    type: Literal["gauge", "counter"]
    labels: tuple[str, ...]
    points: list[Point]


class _Tallied(msgspec.Struct):
    """The fields of a stored event the tallies need (any kind's, any version)."""

    verb: str = ""
    retries: int = 0
    change: _Change | None = None


class _Change(msgspec.Struct):
    kind: str = ""


_tallied = msgspec.json.Decoder(_Tallied)


def tallied(stored: Iterable[bytes]) -> Tallies:
    """Appends and lost compare-and-swaps by verb, from events as stored. A checkpoint is not
    an append (it takes the place of events compaction removed); an event that cannot be read
    counts for nothing (``verify`` names it)."""
    appends: dict[str, int] = {}
    retries: dict[str, int] = {}
    for raw in stored:
        try:
            event = _tallied.decode(raw)
        except msgspec.DecodeError:
            continue
        if event.change is not None and event.change.kind == "checkpoint":
            continue
        appends[event.verb] = appends.get(event.verb, 0) + 1
        if event.retries:
            retries[event.verb] = retries.get(event.verb, 0) + event.retries
    return Tallies(appends, retries)


def node_series(
    kind_gauges: KindGauges, node: str, state: msgspec.Struct, events: int, at: datetime | None
) -> NodeSeries:
    """A node's series from its state (as its head holds it), its stream's length and the time
    of its last event."""
    return NodeSeries(node, kind_gauges.gauges(state), events, at.timestamp() if at else None)


def prefix_of(program: str) -> str:
    """Metric names' prefix: ``resource_gpu_`` for ``resource-gpu``."""
    return program.replace("-", "_") + "_"


def fresh(status: Status, now: float, stale_after: float) -> bool:
    """Whether the view read from etcd may be served at ``now`` (``time.monotonic()``): it is
    at most ``stale_after`` seconds old. Once etcd has been away that long, its series are
    dropped, never served as current, and come back with the next refresh that reaches it."""
    return status.view is not None and now - status.view.read_at <= stale_after


def view_families(view: View, prefix: str, kind_gauges: KindGauges) -> list[Family]:
    """What a view serves for as long as it is fresh: the kind's gauges and each node's
    stream length, the node count and the writes that gave up (rendered once per refresh)."""
    by_name = {
        name: Family(f"{prefix}{name}", help, "gauge", (NODE_LABEL, *labels), [])
        for name, help, labels in kind_gauges.GAUGES
    }
    events = Family(f"{prefix}stream_events", "Events the node's stream holds in etcd.",
                    "gauge", (NODE_LABEL,), [])  # fmt: skip
    for series in view.nodes:
        node = series.node
        for name, labels, value in series.samples:
            by_name[name].points.append(((node, *labels), value))
        events.points.append(((node,), float(series.events)))
    return [
        *by_name.values(),
        events,
        _single(f"{prefix}nodes", "Nodes with a readable record (a head).", float(len(view.nodes))),
        _counter(f"{prefix}write_failures",
                 "Writes that gave up (contention), by verb, as counted in etcd.", view.failures),
    ]  # fmt: skip


def scrape_families(
    status: Status, prefix: str, *, now: float, now_wall: float, stale_after: float
) -> list[Family]:
    """What a scrape at ``now`` (``time.monotonic()``; ``now_wall``: the epoch's) computes
    afresh: ``etcd_up``, the exporter's own counters and the times of the last refresh and
    verify pass, always; while the view is ``fresh``, each node's last event's age and the
    drift count (a verify pass says nothing current while etcd cannot be read either)."""
    view, drift = status.view, status.drift
    served = [
        Family(f"{prefix}etcd_up", "1 when the last refresh read etcd, else 0.", "gauge", (),
               [((), 1.0 if status.up else 0.0)]),
        _counter(f"{prefix}appends", "Events appended since the exporter started, by verb.",
                 status.tallies.appends),
        _counter(f"{prefix}cas_retries",
                 "Compare-and-swaps appends lost to other writers before they landed, by verb.",
                 status.tallies.retries),
    ]  # fmt: skip
    if view is not None:
        served += [
            _single(f"{prefix}last_refresh_timestamp_seconds",
                    "When the last refresh that read etcd finished.", view.read_at_wall),
            _single(f"{prefix}refresh_duration_seconds",
                    "How long the last refresh that read etcd took.", view.seconds),
        ]  # fmt: skip
    if drift is not None:
        served += [
            _single(f"{prefix}last_verify_timestamp_seconds",
                    "When the last whole verify pass finished.", drift.read_at_wall),
            _single(f"{prefix}verify_duration_seconds",
                    "How long the last whole verify pass took.", drift.seconds),
        ]  # fmt: skip
    if view is None or not fresh(status, now, stale_after):
        return served
    ages: list[Point] = [
        ((series.node,), max(now_wall - series.last_event_at, 0.0))
        for series in view.nodes
        if series.last_event_at is not None
    ]
    served.append(
        Family(f"{prefix}last_event_age_seconds", "Seconds since the node's last event.",
               "gauge", (NODE_LABEL,), ages)
    )  # fmt: skip
    if drift is not None:
        served.append(
            _single(f"{prefix}drifted_nodes",
                    "Nodes whose head disagrees with their stream, at the last verify pass.",
                    float(len(drift.nodes)))
        )  # fmt: skip
    return served


def _single(name: str, help: str, value: float) -> Family:
    return Family(name, help, "gauge", (), [((), value)])


def _counter(name: str, help: str, counts: Mapping[str, int]) -> Family:
    points: list[Point] = [((verb,), float(n)) for verb, n in sorted(counts.items())]
    return Family(name, help, "counter", ("verb",), points)


def _added(left: Mapping[str, int], right: Mapping[str, int]) -> dict[str, int]:
    merged = dict(left)
    for key, count in right.items():
        merged[key] = merged.get(key, 0) + count
    return merged
