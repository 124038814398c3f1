"""Orphaned ``.partial`` exports (``ledger.upkeep.orphans``) against the real etcd: a compaction
killed (SIGKILL) after writing its export and before its transaction reaches etcd leaves an
orphan, found and removed; one killed after its commit, before the rename, leaves a
``.partial`` a checkpoint names, which is kept (``verify --repair`` publishes it); one stopped
(SIGSTOP) with its commit on the way, past its export's grace, has its export swept and then
cannot commit: it starts over, and every event ends in exactly one export."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep import export, orphans
from resource_extend.projections.gpu.node import GPU
from tests.audit.helpers import G, head, plant
from tests.audit.test_migration import start
from tests.audit.test_verify_exports import STREAM
from tests.etcdkv import Etcd
from tests.faults import AnswerDroppingProxy
from tests.plugin import TRANSPORT, Plugin


class AtTheNextWrite(AnswerDroppingProxy):
    """With ``act`` set, runs it at the next write, before etcd sees the write: then drops the
    write (``forward`` False: ``act`` killed the writer), or holds it back until ``go`` is set
    (``act`` stopped the writer: a process paused between its last check and its commit)."""

    act: Callable[[], None] | None = None
    forward = True

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.acted = threading.Event()
        self.go = threading.Event()

    def _forward(
        self,
        server: object,
        raw: bytes,
        stream: int,
        write: bool,
        doomed: set[int],
        muted: dict[int, Callable[[], None] | None],
    ) -> None:
        if write and self.act is not None:
            act, self.act = self.act, None
            act()
            self.acted.set()
            if not self.forward:
                self.forward = True  # for the next act, if any
                return
            self.go.wait(60)
        super()._forward(server, raw, stream, write, doomed, muted)  # type: ignore[arg-type]


def killed_compaction(
    plugin: Plugin, proxy: AtTheNextWrite, node: str, exports: Path, *, committed: bool
) -> None:
    """``compact NODE``, SIGKILLed as its transaction goes to etcd: before etcd gets it, or
    (``committed``) once etcd has applied it."""
    compacting = start(plugin, "compact", node, "--keep", "2", "--export-dir", str(exports))
    kill = lambda: compacting.send_signal(signal.SIGKILL)  # noqa: E731
    if committed:
        proxy.crash_on_next_write(kill, at_answer=True)
    else:
        proxy.act, proxy.forward = kill, False
    try:
        compacting.communicate(timeout=60)
    finally:
        compacting.kill()
    assert compacting.returncode == -signal.SIGKILL, "the kill never came"


def test_an_orphan_is_found_and_removed_and_a_committed_partial_kept(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    proxy = AtTheNextWrite(etcd_endpoints[0])
    plugin = Plugin([proxy.url], tmp_path, timeout=10)
    etcd = Etcd(etcd_endpoints, plugin.prefix)
    settings = EtcdConfig(machines=etcd_endpoints, prefix=plugin.prefix, transport=TRANSPORT)
    store = Store(settings, GPU)
    try:
        for node in ("orphaned", "committed"):
            plant(etcd, node, STREAM, head({G: 8}, {G: 7}, 8))
        planted = {kv.key: kv.value for kv in etcd.events("orphaned")}
        killed_compaction(plugin, proxy, "orphaned", exports, committed=False)
        killed_compaction(plugin, proxy, "committed", exports, committed=True)

        [orphan] = [p for p in exports.iterdir() if p.name.startswith("orphaned.")]
        [kept] = [p for p in exports.iterdir() if p.name.startswith("committed.")]
        assert orphan.name.endswith(".jsonl.partial") and kept.name.endswith(".jsonl.partial")
        assert {kv.key: kv.value for kv in etcd.events("orphaned")} == planted  # not committed
        assert [e["seq"] for e in etcd.event_docs("committed")] == [6, 7, 8]  # committed
        assert etcd.event_docs("committed")[0]["change"]["kind"] == "checkpoint"

        # just written: left alone whatever it holds, its compaction might still commit
        [young] = orphans.find_in(store.scans, exports, "orphaned")
        assert not young.orphan and "may still commit" in young.kept

        [found] = orphans.find_in(store.scans, exports, "orphaned", grace=0)
        assert (found.path, found.first, found.last, found.orphan) == (orphan, 1, 6, True)
        [named] = orphans.find_in(store.scans, exports, "committed", grace=0)
        assert not named.orphan and named.kept.startswith("event 1 is not in etcd"), named

        # verify notes the orphan once it is old enough, and --repair deletes it (not the other)
        old = time.time() - 2 * orphans.GRACE
        os.utime(orphan, (old, old))
        archive = ("--archive", str(exports))
        noted = plugin.run("verify", None, "orphaned", *archive)
        assert noted.status == 0, noted.stderr
        assert f"orphaned exports (their events are in etcd): {orphan.name}" in noted.stdout
        assert orphan.is_file()
        swept = plugin.run("verify", None, "orphaned", *archive, "--repair")
        assert swept.status == 0 and f"-> removed: {orphan.name}" in swept.stdout, swept.stdout
        assert not orphan.exists() and kept.is_file()
        assert orphans.find_in(store.scans, exports, "orphaned", grace=0) == []

        # the committed one is still there for verify --repair to publish
        assert plugin.run("verify", None, "orphaned").status == 0
        repaired = plugin.run("verify", None, "committed", "--repair")
        assert repaired.status == 0, repaired.stdout + repaired.stderr
        assert [p.name for p in exports.iterdir()] == [kept.name.removesuffix(export.PARTIAL)]
    finally:
        store.close()
        etcd.close()
        proxy.close()


def test_a_compaction_paused_past_its_grace_cannot_commit_once_its_export_is_swept(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    """Stopped with its commit on the way (after the age check), a compaction's ``.partial``
    grows older than the grace and ``verify --repair`` sweeps it as an orphan (its events are
    all in etcd). Resumed, its commit is refused, as the sweep marked the node in etcd, and it
    starts over: the events end in one published export, none in no file. Without the mark
    the commit landed and its events were in no file and not in etcd."""
    exports = tmp_path / "exports"
    exports.mkdir()
    proxy = AtTheNextWrite(etcd_endpoints[0])
    plugin = Plugin([proxy.url], tmp_path, timeout=10)
    etcd = Etcd(etcd_endpoints, plugin.prefix)
    try:
        plant(etcd, "paused", STREAM, head({G: 8}, {G: 7}, 8))
        compacting = start(plugin, "compact", "paused", "--keep", "2", "--export-dir", str(exports))
        proxy.act = lambda: compacting.send_signal(signal.SIGSTOP)
        try:
            assert proxy.acted.wait(30), "the compaction never sent its commit"
            [partial] = exports.iterdir()
            old = time.time() - 2 * orphans.GRACE
            os.utime(partial, (old, old))
            swept = plugin.run("verify", None, "paused", "--archive", str(exports), "--repair")
            assert f"-> removed: {partial.name}" in swept.stdout, swept.stdout + swept.stderr
            assert not partial.exists()
        finally:
            proxy.go.set()
            compacting.send_signal(signal.SIGCONT)
        _, err = compacting.communicate(timeout=60)
        assert compacting.returncode == 0, err
        assert [e["seq"] for e in etcd.event_docs("paused")] == [6, 7, 8]
        [published] = exports.iterdir()
        assert not published.name.endswith(export.PARTIAL)
        lines = [json.loads(line) for line in published.read_bytes().splitlines()]
        assert [line["seq"] for line in lines] == [1, 2, 3, 4, 5, 6]
        verified = plugin.run("verify", None, "paused")
        assert verified.status == 0, verified.stdout + verified.stderr
        assert "1 export checked" in verified.stdout, verified.stdout
    finally:
        etcd.close()
        proxy.close()
