"""A node's page (``history --html``), without etcd: ``commands.audit.chart`` and ``page``.

The charts' points are the fold's values after every event, for both kinds (read off the states
themselves, not through the views that made them); every event is marked, whatever its kind,
with its words on hover and a row to link to; what a writer put in an event cannot become
markup."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from resource_extend.commands.audit import chart, tally
from resource_extend.commands.audit.page import Page, Source, Verdict, render
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
from resource_extend.projections.parts import Measure
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


def series_of(selected: list[chart.Row], measures: Any) -> list[chart.Series]:
    """The charts' series of ``selected``, each row's measures worked out first, as a page does."""
    return chart.series(selected, chart.measured(selected, measures))


def drawn(series: list[chart.Series]) -> dict[str, list[tuple[int, int, int]]]:
    return {s.chart: [(p.seq, p.capacity, p.usage) for p in s.points] for s in series}


def test_gpu_points_are_the_folds_cards_after_every_event() -> None:
    charts = drawn(series_of(rows(GPU, EVERY_KIND), gpu_views.measures))
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
    charts = drawn(series_of(rows(GPU, events), gpu_views.measures))
    assert charts == {product: gpu_points(events, product) for product in (P70, P90)}


def test_a_compacted_stream_starts_from_its_checkpoints_state() -> None:
    gone = EVERY_KIND[:7]
    checkpoint = Event(
        seq=7, at=T0 + timedelta(days=1), verb="compact", op="c",
        change=audit.checkpoint_for(GPU, gone, "archive:n1.jsonl"),
    )  # fmt: skip
    events = [checkpoint, *EVERY_KIND[7:]]
    charts = drawn(series_of(rows(GPU, events), gpu_views.measures))
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
    charts = drawn(series_of(rows(STORAGE, STORAGE_LIFE), storage_views.measures))
    assert list(charts) == [
        "volume /data0", "volume /data1", "storage",  # a volume added later, with the others
        "/dev/vda read IOPS", "/dev/vda write IOPS", "/dev/vda read B/s", "/dev/vda write B/s",
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


SOURCE = Source(
    ["http://10.0.0.1:2379"],
    "/eru",
    "head /eru/resource/gpu/n1",
    "resource-gpu history n1",
    "auditor@audit-host",
)


def page_of(kind: Any, view: Any, events: list[Any], verdict: Verdict | None = None) -> str:
    selected = rows(kind, events)
    return render(
        Page(
            program=kind.program, node="n1", rows=selected, charted=selected,
            verdict=verdict or Verdict(True, []), notes=[], written=T0, version="test",
            source=SOURCE,
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


def test_a_page_works_out_each_event_s_measures_once_for_its_charts_and_its_table() -> None:
    asked: list[object] = []

    class Counted:
        """The GPU view, counting the states it is asked to measure."""

        def __getattr__(self, name: str) -> Any:
            return getattr(gpu_views, name)

        @staticmethod
        def measures(state: NodeState | None) -> list[Measure]:
            asked.append(state)
            return gpu_views.measures(state)

    assert page_of(GPU, Counted(), EVERY_KIND) == page_of(GPU, gpu_views, EVERY_KIND)
    assert len(asked) == len(EVERY_KIND)


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
        "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "ul", "li",
        "span", "section", "svg", "line", "path", "a", "figure", "figcaption", "b", "i", "br",
        "dl", "dt", "dd", "table", "thead", "tbody", "tr", "th", "td",
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
    assert ">512M/s<" in page  # the write quota's top, as eru writes sizes
    assert 'aria-label="/dev/vda read B/s"' not in page  # never used: said in one line
    idle = "never used over these events: /dev/vda write IOPS (of 500), /dev/vda read B/s (of 1G/s)"
    assert idle in page


def test_figures_read_as_amounts() -> None:
    assert chart.figure(0, "B") == "0"
    assert chart.figure(1536 * GIB, "B") == "1.5T"
    assert chart.figure(100 << 20, "B/s") == "100M/s"
    assert chart.figure(12000, "IOPS") == "12,000"
    assert chart.figure(8, "cards") == "8"


def test_each_chart_says_where_it_ends() -> None:
    page = page_of(GPU, gpu_views, EVERY_KIND[:8])
    assert "now: 4 of 8 cards used" in page
    storage = page_of(STORAGE, storage_views, STORAGE_LIFE[:2])
    assert "now: 10G of 100G used" in storage
    assert "now: 100 of 1,000 IOPS used" in storage


def test_any_kind_gets_a_page_from_what_its_view_measures() -> None:
    from tests.apples import APPLES, View

    events = stream(
        NodeAdded(capacity=10), UsageChanged(delta=3), UsageRebuilt(usage=2, diffs=["3 != 2"])
    )
    assert drawn(series_of(rows(APPLES, events), View.measures)) == {
        "apples": [(1, 10, 0), (2, 10, 3), (3, 10, 2)]
    }
    page = page_of(APPLES, View(), events)
    assert 'aria-label="apples"' in page and "now: 2 of 10 apples used" in page


@given(st.integers(0, 1 << 62), st.sampled_from(["cards", "IOPS", "B", "B/s"]))
@FAST
def test_gridlines_are_round_and_cover_the_top(top: int, unit: str) -> None:
    grid = chart.levels(top, unit)
    step = grid[1]
    assert grid[0] == 0 and grid[-1] >= top and len(grid) <= 6
    assert grid == [step * index for index in range(len(grid))]
    if unit in chart.BYTES:
        assert step & (step - 1) == 0  # a power of two: 256M, 512G, 1T
    else:
        assert int(str(step).rstrip("0")) in (1, 2, 5)
    assert chart.levels(8, "cards") == [0, 2, 4, 6, 8]
    assert [chart.figure(n, "B") for n in chart.levels(GIB << 10, "B")] == [
        "0", "256G", "512G", "768G", "1T"
    ]  # fmt: skip


def test_time_ticks_fall_at_round_instants_and_carry_their_date_where_it_is_news() -> None:
    def ticks(start: datetime, length: timedelta) -> list[chart.Tick]:
        return chart.Span(start, start + length).ticks()

    evening = datetime(2026, 12, 6, 19, 47, 13, 350_000, tzinfo=timezone.utc)
    assert [(t.time, t.date) for t in ticks(evening, timedelta(minutes=40))] == [
        ("19:50", "2026-12-06"), ("20:00", None), ("20:10", None), ("20:20", None),
    ]  # fmt: skip
    overnight = ticks(evening, timedelta(hours=30))
    assert [t.time for t in overnight] == ["00:00", "06:00", "12:00", "18:00", "00:00"]
    assert [t.date for t in overnight] == ["2026-12-07", None, None, None, "2026-12-08"]
    week = ticks(evening, timedelta(days=9))
    assert [t.date for t in week] == [f"2026-12-{day:02}" for day in (7, 9, 11, 13, 15)]
    assert all(t.time == "" for t in week)
    quick = ticks(evening, timedelta(milliseconds=180))
    assert [t.time for t in quick] == [
        "19:47:13.350",
        "19:47:13.400",
        "19:47:13.450",
        "19:47:13.500",
    ]
    for each in (overnight, week, quick):
        assert all(0 <= t.percent <= 100 for t in each)


def test_the_summary_tallies_peak_mean_and_time_at_capacity() -> None:
    events = stream(
        NodeAdded(capacity={P90: 4}),  # minute 1
        UsageChanged(delta={P90: 4}),  # minute 2: full for a minute
        UsageChanged(delta={P90: -2}),  # minute 3: half, for a minute
        UsageChanged(delta={P90: -2}),  # minute 4: the span's end
    )
    (found,) = [tally.tally(s) for s in series_of(rows(GPU, events), gpu_views.measures)]
    assert (found.capacity, found.peak, found.peak_at) == (4, 4, T0 + timedelta(minutes=2))
    assert found.full == timedelta(minutes=1) and found.span == timedelta(minutes=3)
    assert found.mean == (0 + 4 + 2) / 3
    page = page_of(GPU, gpu_views, events)
    assert "Over these events" in page and "1 min 0 s (33%)" in page
    assert "events per verb: test 4" in page


def test_the_table_shows_short_ids_and_a_state_only_where_it_changed() -> None:
    long_op = "0123456789abcdef" * 2
    events = [replace(e, op=long_op) for e in EVERY_KIND]
    page = page_of(GPU, gpu_views, events)
    listed = dict(re.findall(r'<tr id="e(\d+)"(.*?)</tr>', page))
    assert len(listed) == len(events)
    for found in listed.values():
        assert f'title="{long_op}">01234567</td>' in found  # short, whole on hover
    shown = {
        seq: re.findall(r'<span class="m">(.*?)</span>', row.split('class="after"')[1])
        for seq, row in listed.items()
    }
    assert shown["1"] == [f"{P70} 0 of 2"]
    assert shown["2"] == [f"{P90} 0 of 4"]  # the 3070's state did not change: not repeated
    assert shown["3"] == [f"{P90} 2 of 4"]
    assert shown["9"] == ["no node"]


def test_the_source_and_who_are_on_the_record() -> None:
    hostile = Source(['http://"><b>:2379'], "/eru<i>", "k", "resource-gpu history '<x>'", "a@b")
    events = stream(NodeAdded(capacity={P90: 4}))
    page = render(
        Page(program="resource-gpu", node="n1", rows=rows(GPU, events), charted=rows(GPU, events),
             verdict=Verdict(True, []), notes=[], written=T0, version="t", source=hostile),
        gpu_views, lambda event: summary(gpu_views, event),
    )  # fmt: skip
    assert "<dt>etcd</dt><dd>http://&quot;&gt;&lt;b&gt;:2379</dd>" in page
    assert "<dt>command</dt><dd>resource-gpu history &#x27;&lt;x&gt;&#x27;</dd>" in page
    assert "<dt>made by</dt><dd>a@b</dd>" in page
    assert "core sends no workload or request id" in page


def test_a_checkpoint_says_who_compacted_and_when() -> None:
    (checkpoint, *_) = CHECKPOINTED
    said = summary(gpu_views, checkpoint)
    assert said.startswith("compacted at 2026-11-30T03:00:00Z by auditor@test-host: stands for")
    assert "events 1..3 (the last written 2026-11-29T03:03:00Z)" in said
