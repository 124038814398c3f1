"""A node's page (``history --html``), without etcd: ``commands.audit.chart`` and ``page``.

The charts' points are the fold's values after every event, for both kinds (read off the states
themselves, not through the views that made them); every event is marked, whatever its kind,
with its words on hover and a row to link to; what a writer put in an event cannot become
markup."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from resource_extend.commands.audit import chart
from resource_extend.commands.audit.page import Page, Verdict, render
from resource_extend.commands.audit.reading import summary
from resource_extend.ledger.model import audit
from resource_extend.projections.changes import (
    Adopted,
    CapacityChanged,
    CapacitySet,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from resource_extend.projections.gpu import views as gpu_views
from resource_extend.projections.gpu.events import Event, HeadRepaired
from resource_extend.projections.gpu.node import GPU
from resource_extend.projections.gpu.state import NodeState
from resource_extend.projections.storage import views as storage_views
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.node import STORAGE
from resource_extend.projections.storage.state import NodeState as StorageState
from resource_extend.projections.storage.wire.resources import NodeResource
from tests.unit.strategies import FAST

T0 = datetime(2026, 11, 29, 3, 0, tzinfo=timezone.utc)
P70, P90 = "nvidia-3070", "nvidia-3090"


def stream(*changes: Any, start: int = 1) -> list[Any]:
    """Events a minute apart from T0, seq ``start`` on, by one writer."""
    return [
        Event(seq=seq, at=T0 + timedelta(minutes=seq), verb="test", op=f"op{seq}", change=change,
              by="auditor@test-host")
        for seq, change in enumerate(changes, start=start)
    ]  # fmt: skip


def rows(kind: Any, events: list[Any]) -> list[chart.Row]:
    return list(zip(events, audit.states(kind, events), strict=True))


EVERY_KIND = stream(
    NodeAdded(capacity={P70: 2}),
    CapacityChanged(delta={P90: 4}),
    UsageChanged(delta={P90: 2}, workloads=[{P90: 1}, {P90: 1}]),
    UsageSet(usage={P90: 3, P70: 1}),
    CapacitySet(capacity={P90: 8, P70: 2}),
    NodeInfoSet(capacity={P90: 8}, usage={P90: 5}),
    UsageRebuilt(usage={P90: 4}, diffs=["nvidia-3090: usage 5, workloads hold 4"]),
    HeadRepaired(found='{"capacity":{}}', state=NodeState(capacity={P90: 8}, usage={P90: 4})),
    NodeRemoved(),
    NodeAdded(capacity={P70: 1}),
)
"""A GPU stream with a change of every kind but adoption and checkpoint (see below)."""


def gpu_points(events: list[Any], product: str) -> list[tuple[int, int, int]]:
    """The fold's cards of ``product`` after each event: (seq, capacity, usage)."""
    states = audit.states(GPU, events)
    return [
        (e.seq, s.capacity.get(product, 0) if s else 0, s.usage.get(product, 0) if s else 0)
        for e, s in zip(events, states, strict=True)
    ]


def drawn(series: list[chart.Series]) -> dict[str, list[tuple[int, int, int]]]:
    return {s.chart: [(p.seq, p.capacity, p.usage) for p in s.points] for s in series}


def test_gpu_points_are_the_folds_cards_after_every_event() -> None:
    charts = drawn(chart.series(rows(GPU, EVERY_KIND), gpu_views.measures))
    assert list(charts) == [P70, P90]
    for product in (P70, P90):
        assert charts[product] == gpu_points(EVERY_KIND, product)
    assert charts[P90][7] == (8, 8, 4)  # the repair's state
    assert charts[P90][8] == (9, 0, 0)  # removed: nothing


@given(
    st.lists(st.fixed_dictionaries({P70: st.integers(-3, 3), P90: st.integers(-3, 3)}), max_size=30)
)
@FAST
def test_gpu_points_follow_any_usage(deltas: list[dict[str, int]]) -> None:
    changes: list[Any] = [UsageChanged(delta={p: n for p, n in d.items() if n}) for d in deltas]
    events = stream(NodeAdded(capacity={P70: 64, P90: 64}), *changes)
    charts = drawn(chart.series(rows(GPU, events), gpu_views.measures))
    assert charts == {product: gpu_points(events, product) for product in (P70, P90)}


def test_a_compacted_stream_starts_from_its_checkpoints_state() -> None:
    gone = EVERY_KIND[:7]
    checkpoint = Event(
        seq=7, at=T0 + timedelta(days=1), verb="compact", op="c",
        change=audit.checkpoint_for(GPU, gone, "archive:n1.jsonl"),
    )  # fmt: skip
    events = [checkpoint, *EVERY_KIND[7:]]
    charts = drawn(chart.series(rows(GPU, events), gpu_views.measures))
    assert charts[P90] == [(7, 8, 4), (8, 8, 4), (9, 0, 0), (10, 0, 0)]
    assert charts[P70] == [(7, 0, 0), (8, 0, 0), (9, 0, 0), (10, 1, 0)]
    assert chart.Span.of(rows(GPU, events)).start == gone[-1].at  # the checkpoint's time


GIB = 1 << 30
DISK = Disk(device="/dev/vda", mounts=["/data0"], read_iops=1000, write_iops=500,
            read_bps=GIB, write_bps=GIB // 2)  # fmt: skip
STORAGE_LIFE = stream(
    NodeAdded(capacity=NodeResource(volumes={"/data0": 100 * GIB}, storage=200 * GIB,
                                    disks=[DISK])),
    UsageChanged(delta=NodeResource(volumes={"/data0": 10 * GIB}, storage=10 * GIB,
                                    disks=[replace(DISK, read_iops=100, write_iops=0,
                                                   read_bps=0, write_bps=GIB // 4)])),
    CapacityChanged(delta=NodeResource(volumes={"/data1": 50 * GIB}, storage=50 * GIB)),
    UsageRebuilt(usage=NodeResource(volumes={"/data1": GIB}, storage=GIB),
                 diffs=["volumes /data0: usage 10G, workloads hold 0"]),
    NodeRemoved(),
)  # fmt: skip
"""A storage node's life: volumes, storage and a disk's quotas, each moving."""


def storage_points(field: Any) -> list[tuple[int, int, int]]:
    """``field(resource)`` of capacity and usage after each event of ``STORAGE_LIFE``."""
    states: list[StorageState | None] = audit.states(STORAGE, STORAGE_LIFE)
    return [
        (e.seq, field(s.capacity) if s else 0, field(s.usage) if s else 0)
        for e, s in zip(STORAGE_LIFE, states, strict=True)
    ]


def quota(resource: NodeResource, index: int) -> int:
    found = [d.quota[index] for d in resource.disks or () if d.device == "/dev/vda"]
    return found[0] if found else 0


def test_storage_points_are_the_folds_volumes_storage_and_quotas_after_every_event() -> None:
    charts = drawn(chart.series(rows(STORAGE, STORAGE_LIFE), storage_views.measures))
    assert list(charts) == [
        "volume /data0", "storage", "/dev/vda read IOPS", "/dev/vda write IOPS",
        "/dev/vda read B/s", "/dev/vda write B/s", "volume /data1",  # as it first appeared
    ]  # fmt: skip
    assert charts["volume /data0"] == storage_points(lambda r: (r.volumes or {}).get("/data0", 0))
    assert charts["volume /data1"] == storage_points(lambda r: (r.volumes or {}).get("/data1", 0))
    assert charts["storage"] == storage_points(lambda r: r.storage)
    for index, name in enumerate(("read IOPS", "write IOPS", "read B/s", "write B/s")):
        assert charts[f"/dev/vda {name}"] == storage_points(lambda r, i=index: quota(r, i))
    assert charts["/dev/vda read IOPS"][1] == (2, 1000, 100)


class Elements(HTMLParser):
    """Every element of a page, with its attributes, and the text inside each ``<title>``."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.titles: list[str] = []
        self._in_title = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles.append(data)
            self._in_title = False

    def all(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [
            found for name, found in self.found
            if name == tag and all(found.get(k) == v for k, v in attrs.items())
        ]  # fmt: skip


def page_of(kind: Any, view: Any, events: list[Any], verdict: Verdict | None = None) -> str:
    selected = rows(kind, events)
    return render(
        Page(
            program=kind.program, node="n1", rows=selected, charted=selected,
            verdict=verdict or Verdict(True, []), notes=[], written=T0, version="test",
        ),
        view,
        lambda event: summary(view, event),
    )  # fmt: skip


ADOPTED = stream(Adopted(capacity={P90: 4}, usage={P90: 1}), UsageChanged(delta={P90: 1}))
CHECKPOINTED = [
    Event(seq=3, at=T0 + timedelta(days=1), verb="compact", op="c", by="auditor@test-host",
          change=audit.checkpoint_for(GPU, EVERY_KIND[:3], "archive:n1.jsonl")),
    *EVERY_KIND[3:5],
]  # fmt: skip


def test_every_event_of_every_kind_is_marked_and_listed() -> None:
    seen: set[str] = set()
    for events in (EVERY_KIND, ADOPTED, CHECKPOINTED):
        page = Elements(page_of(GPU, gpu_views, events))
        for event in events:
            links = page.all("a", href=f"#e{event.seq}")
            ticks = page.all("line", **{"class": f"k-{event.kind}"})
            assert links and ticks, f"event {event.seq} ({event.kind}) is not marked"
            assert page.all("tr", id=f"e{event.seq}", **{"class": f"k-{event.kind}"})
            words = chart.words(event, summary(gpu_views, event))
            assert words in page.titles
            for part in (f"seq {event.seq}", event.verb, event.kind, event.op, "auditor@test-host"):
                assert part in words
            seen.add(event.kind)
    assert seen == set(gpu_views.KINDS)


def test_compactions_fixes_repairs_adoptions_and_removals_are_ruled_across_each_chart() -> None:
    for events in (EVERY_KIND, ADOPTED, CHECKPOINTED):
        page = page_of(GPU, gpu_views, events)
        charts = [drawn.split("</svg>")[0] for drawn in page.split('<svg class="chart"')[1:]]
        assert charts
        for drawn in charts:
            ruled = {e.kind for e in events if f'class="k-{e.kind}"' in drawn}
            assert ruled == {e.kind for e in events} & set(chart.RULED)


def test_a_fixs_diffs_show_in_its_row() -> None:
    page = page_of(GPU, gpu_views, EVERY_KIND)
    assert "diffs: nvidia-3090: usage 5, workloads hold 4" in page


def test_what_a_writer_put_in_an_event_cannot_become_markup() -> None:
    hostile = '"><script>alert(1)</script><b x="'
    events = [
        replace(e, by=hostile, verb=hostile, op=hostile)
        for e in stream(NodeAdded(capacity={hostile: 1}), UsageChanged(delta={hostile: 1}))
    ]
    page = page_of(GPU, gpu_views, events, Verdict(False, [hostile]))
    assert "<script" not in page
    assert {tag for tag, _ in Elements(page).found} <= {
        "html", "head", "meta", "title", "style", "body", "h1", "p", "div", "ul", "li", "span",
        "section", "svg", "line", "text", "path", "a", "figure", "figcaption", "b", "table",
        "thead", "tbody", "tr", "th", "td",
    }  # fmt: skip


def test_a_page_with_no_events_says_so() -> None:
    page = page_of(GPU, gpu_views, [])
    assert "No events match." in page
    assert "<svg" not in page
    assert Elements(page).all("table")


def test_the_verdict_is_at_the_top() -> None:
    agrees = page_of(GPU, gpu_views, EVERY_KIND)
    assert "verify: the head agrees with the stream" in agrees
    said = "usage differs: head {}, stream {nvidia-3090: 4}"
    disagrees = page_of(GPU, gpu_views, EVERY_KIND, Verdict(False, [said]))
    assert disagrees.index("verify: disagrees") < disagrees.index('<svg class="chart"')
    assert "usage differs: head {}, stream {nvidia-3090: 4}" in disagrees


def test_storage_pages_chart_each_measure() -> None:
    page = page_of(STORAGE, storage_views, STORAGE_LIFE)
    for name in ("volume /data0", "volume /data1", "storage", "/dev/vda read IOPS"):
        assert f'aria-label="{name}"' in page
    assert "1 GiB/s" in page  # the read quota's top, in binary units


def test_figures_read_as_amounts() -> None:
    assert chart.figure(0, "B") == "0 B"
    assert chart.figure(1536 * GIB, "B") == "1.5 TiB"
    assert chart.figure(100 << 20, "B/s") == "100 MiB/s"
    assert chart.figure(12000, "IOPS") == "12,000"
    assert chart.figure(8, "cards") == "8"


def test_each_chart_says_where_it_ends() -> None:
    page = page_of(GPU, gpu_views, EVERY_KIND[:8])
    assert "now: 4 of 8 cards used" in page
    storage = page_of(STORAGE, storage_views, STORAGE_LIFE[:2])
    assert "now: 10 GiB of 100 GiB used" in storage
    assert "now: 100 of 1,000 IOPS used" in storage


def test_any_kind_gets_a_page_from_what_its_view_measures() -> None:
    from tests.apples import APPLES, View

    events = stream(
        NodeAdded(capacity=10), UsageChanged(delta=3), UsageRebuilt(usage=2, diffs=["3 != 2"])
    )
    assert drawn(chart.series(rows(APPLES, events), View.measures)) == {
        "apples": [(1, 10, 0), (2, 10, 3), (3, 10, 2)]
    }
    page = page_of(APPLES, View(), events)
    assert 'aria-label="apples"' in page and "now: 2 of 10 apples used" in page
