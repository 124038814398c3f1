"""``streams: {max_events: M, export_dir: DIR}`` in gpu.yaml: every append that takes a stream
past M + M//10 events compacts it back to M (its checkpoint included), exporting first.
Bounds with neither ``archive_dir`` nor ``export_dir`` are a config error for every verb that
opens the store."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.host.config import Destination, EtcdConfig
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep.compaction import compact
from resource_extend.projections.gpu.events import decode_event
from resource_extend.projections.gpu.node import GPU
from tests.audit.helpers import (
    Doc,
    G,
    added,
    error_line,
    event,
    export_chain,
    head,
    head_doc,
    ok_json,
    ok_text,
    plant,
    prod,
    requests,
    run_many,
    take,
    used,
    write_streams,
)
from tests.etcdkv import Etcd, no_write
from tests.plugin import TRANSPORT, Plugin

pytestmark = pytest.mark.grpc

M = 10


def test_streams_stay_bounded_and_nothing_is_lost(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    directory = tmp_path / "exports"
    directory.mkdir()
    write_streams(plugin, {"max_events": M, "export_dir": str(directory)})
    # 8 events already (a card taken by each of events 2..8), then appends through the binary
    planted = [event(1, added({G: 16}))] + [event(s, used({G: 1})) for s in range(2, 9)]
    plant(etcd, "n1", planted, head({G: 16}, {G: 7}, 8))
    usage = 7
    lengths = []
    for i in range(6):
        give_back = i % 3 == 2
        request = {
            "nodename": "n1",
            "workloads_resource": [{"prod_count_map": {G: 1}}],
            "delta": True,
            "incr": not give_back,
        }
        answer = plugin.ok("set-node-resource-usage", request)
        usage += -1 if give_back else 1
        assert prod(answer["after"]) == {G: usage}
        lengths.append(len(etcd.events("n1")))
    # grows to M + M//10, and the append after that compacts it back to M
    assert max(lengths) == M + M // 10
    assert lengths == [9, 10, 11, 10, 11, 10]

    files = sorted(directory.iterdir())
    assert len(files) == 2 and all(f.name.endswith(".jsonl") for f in files), files
    exported = [decode_event(line) for f in files for line in f.read_bytes().splitlines()]
    kept = [decode_event(kv.value) for kv in etcd.events("n1")]
    assert kept[0].kind == "checkpoint"
    # every event ever appended is in exactly one export or still in the stream
    written = [e.seq for e in exported + kept if e.kind != "checkpoint"]
    assert written == list(range(1, 15))

    verified, history = run_many(plugin, [["verify", "n1"], ["history", "n1", "--json"]])
    assert ok_text(verified).startswith("1 node verified")
    events = ok_json(history)
    assert len(events) == M
    assert events[0]["change"]["first"] == 1
    info = plugin.info("n1")
    assert (prod(info["capacity"]), prod(info["usage"])) == ({G: 16}, {G: usage})
    assert head_doc(etcd, "n1") == head({G: 16}, {G: usage}, 14)


def test_bounds_without_anywhere_to_export_are_a_config_error(plugin: Plugin, etcd: Etcd) -> None:
    """Streams are bounded by default, so emptying both destinations is refused, by name."""
    plugin.add("n1", {G: 1})
    write_streams(plugin, {"max_events": M, "export_dir": ""})
    calls: list[tuple[str, Doc]] = [
        ("add-node", {"nodename": "n2", "resource": {"prod_count_map": {G: 1}}}),
        take("n1", {G: 1}),
        ("get-node-resource-info", {"nodename": "n1"}),
    ]
    with no_write(etcd):
        writes = requests(plugin, calls)
        reads = run_many(plugin, [["history", "n1"], ["nodes"]])
    verbs = [verb for verb, _ in calls] + ["history", "nodes"]
    for verb, result in zip(verbs, writes + reads, strict=True):
        line = error_line(result, verb)
        assert "streams.archive_dir or streams.export_dir" in line, line


def test_a_compaction_that_cannot_happen_leaves_no_exports_behind(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """The appends succeed (compaction is best effort), but each one that tries to compact a
    stream with a missing event must not leave an export of events that were not removed."""
    stream = [event(1, added({G: 8}))] + [event(s, used({G: 1})) for s in (3, 4, 5, 6)]
    plant(etcd, "n1", stream, head({G: 8}, {G: 5}, 6))  # event 2 is lost
    write_streams(plugin, {"max_events": 4, "export_dir": str(tmp_path / "exports")})
    (tmp_path / "exports").mkdir()
    plugin.ok(*take("n1", {G: 1}))
    plugin.ok(*take("n1", {G: 1}))
    assert len(etcd.events("n1")) == 7  # nothing compacted
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == []


def test_auto_compaction_takes_old_events_and_leaves_young_ones(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """``streams.min_age`` (default 300 s) holds for compaction after a write: the stream goes
    past its bound rather than lose an event a call whose answer was lost may look for."""
    directory = tmp_path / "exports"
    directory.mkdir()
    write_streams(plugin, {"max_events": 2, "export_dir": str(directory)})  # bound: 3 events
    plant(etcd, "n1", [event(1, added({G: 8})), event(2, used({G: 1})), event(3, used({G: 1}))],
          head({G: 8}, {G: 2}, 3))  # fmt: skip
    lengths = []
    for _ in range(4):
        plugin.ok(*take("n1", {G: 1}))
        lengths.append([e["seq"] for e in etcd.event_docs("n1")])
    assert lengths == [
        [3, 4],  # events 1..3 were a month old: compacted
        [3, 4, 5],
        [3, 4, 5, 6],  # over the bound, but event 4 is young: nothing goes
        [3, 4, 5, 6, 7],
    ]
    chain = export_chain(etcd, "n1")
    assert [e["seq"] for e in chain.events] == [1, 2, 3, 4, 5, 6, 7]
    assert len(chain.files) == 1 == len(list(directory.iterdir()))
    assert ok_text(run_many(plugin, [["verify", "n1"]])[0]).startswith("1 node verified")


def test_young_events_blocking_auto_compaction_cost_one_small_read(
    plugin: Plugin, etcd: Etcd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Auto-compaction runs after every write while a stream is over its bound: with young
    events in the way it must read only as far as it needs to know that (``at_least + 1``
    events), not the thousands a cut would otherwise take."""
    now = datetime.now(timezone.utc)
    young = [event(s, used({G: 1 if s % 2 else -1}), at=now) for s in range(2, 2001)]
    plant(etcd, "n1", [event(1, added({G: 8})), *young], head({G: 8}, {}, 2000))
    settings = EtcdConfig(machines=plugin.endpoints, prefix=plugin.prefix, transport=TRANSPORT)
    store = Store(settings, GPU)
    events_read: list[int] = []
    send = Connection._send

    def counting(self: Connection, request: Any, reply: Any, **options: Any) -> Any:
        answer = send(self, request, reply, **options)
        ranges = answer.ranges() if isinstance(answer, wire.TxnResponse) else [answer]
        streams = store.keys.events_root
        events_read.append(sum(1 for r in ranges for kv in r.kvs if kv.key.startswith(streams)))
        return answer

    monkeypatch.setattr(Connection, "_send", counting)
    try:
        for at_least in (1, 100):
            events_read.clear()
            done = compact(
                store, "n1", keep=999, to=Destination(str(tmp_path)), min_age=300, at_least=at_least
            )
            assert done is None
            # the first key (with the head), then one page of at_least + 1 events
            assert sum(events_read) <= 1 + at_least + 1, (at_least, events_read)
    finally:
        store.close()
    assert len(etcd.events("n1")) == 2000
