"""The exporter's two background jobs: the refresher reads every node from etcd each
``--every`` seconds into a new :class:`Status`, the verifier walks every stream each
``--verify-every`` seconds. Scrapes read the latest status from memory; nothing here blocks
them.

Each refresh is one paged range over the kind's heads (one revision), two point reads a node
for where its stream starts, the failure tallies, and, for the nodes whose head moved, the
events appended since the last refresh, read in windows of seqs: those are the counters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from resource_extend.commands.exporter.view import (
    Drift,
    NodeSeries,
    Status,
    Tallies,
    View,
    node_series,
    tallied,
)
from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.digests import tip_in_head
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.store import Store
from resource_extend.ledger.store import survey as reads

if TYPE_CHECKING:
    from resource_extend.projections.parts import KindGauges

Report = Callable[[str, bool], None]
"""Told one line for the operator: ``(line, is_failure)``."""
Render = Callable[[View], bytes]
"""A view's series in the text format (``exporter_serve.render`` of ``view_families``)."""


class _Read(msgspec.Struct, frozen=True):
    """What one refresh read."""

    nodes: list[NodeSeries]
    failures: dict[str, int]
    ends: dict[str, int]
    """Each stream's end, to count appends from next time (removed nodes' included)."""
    present: set[str]
    """The nodes with a head."""
    tallies: Tallies


class Refresher:
    """Keeps :attr:`status` current: replaced whole, under a lock, by both jobs; read without
    it (a scrape takes one reference)."""

    def __init__(
        self,
        etcd: EtcdConfig,
        kind: Kind[msgspec.Struct],
        kind_gauges: KindGauges,
        render: Render,
        report: Report,
    ) -> None:
        self._etcd = etcd
        self._kind = kind
        self._kind_gauges = kind_gauges
        self._render = render
        self._report = report
        self._lock = threading.Lock()
        self.status = Status()
        self._ends: dict[str, int] | None = None
        """Each node's stream end as last counted (removed nodes' too); None before the first
        refresh, which only takes note: counters start at the exporter's start."""
        self._present: set[str] = set()
        self._failing = False
        self._verify_failing = False

    def _publish(self, **changes: object) -> None:
        with self._lock:
            self.status = msgspec.structs.replace(self.status, **changes)

    def _store(self) -> Store[msgspec.Struct]:
        store = Store(self._etcd, self._kind)
        store.etcd.budget_per_request()  # a job over every node: each request has etcd.timeout
        return store

    # -- the refresher ----------------------------------------------------------------------

    def refresh(self) -> bool:
        """One refresh; False (``etcd_up`` 0, the last view kept until it is stale) when etcd
        could not be read, said once on stderr until it can again."""
        started = time.monotonic()
        store = self._store()
        try:
            read = self._read(store)
        except PluginError as exc:
            self._publish(up=False)
            if not self._failing:
                self._report(f"cannot read etcd: {exc.reason}", True)
            self._failing = True
            return False
        finally:
            store.close()
        now = time.monotonic()
        view = View(now, time.time(), now - started, read.nodes, read.failures)
        rendered = self._render(view)
        self._ends, self._present = read.ends, read.present
        with self._lock:
            tallies = self.status.tallies.plus(read.tallies)
            self.status = msgspec.structs.replace(
                self.status, view=view, rendered=rendered, up=True, tallies=tallies
            )
        if self._failing:
            self._report("etcd can be read again", False)
        self._failing = False
        return True

    def _read(self, store: Store[msgspec.Struct]) -> _Read:
        heads, _ = store.scans.all_heads()
        states: dict[str, tuple[msgspec.Struct, int]] = {}
        for node, raw in heads.items():
            try:
                head = self._kind.read_head(raw)
            except msgspec.DecodeError:
                continue  # no series for a head that cannot be read (verify names it)
            states[node] = (head.state, head.seq or 0)
        ends = {node: seq for node, (_, seq) in states.items()}
        starts = reads.stream_starts(store, ends)
        nodes = [
            node_series(
                self._kind_gauges,
                node,
                state,
                seq - starts[node] + 1 if seq else 0,
                tip_in_head(heads[node]).at,
            )
            for node, (state, seq) in sorted(states.items())
        ]
        failures = store.outcomes.write_failures()
        counted, tallies = self._appended(store, ends, starts)
        return _Read(nodes, failures, counted, set(ends), tallies)

    def _appended(
        self, store: Store[msgspec.Struct], ends: dict[str, int], starts: dict[str, int]
    ) -> tuple[dict[str, int], Tallies]:
        """The stream ends to count from next time, and the tallies of the events appended
        since the last refresh: those of each node whose head moved on, and of each node
        whose head went (removed: its stream ends with the removal)."""
        before = self._ends
        if before is None:
            return dict(ends), Tallies()
        through = dict(ends)
        gone = sorted(self._present - ends.keys())
        if gone:
            for node, bounds in store.scans.stream_bounds(gone).items():
                through[node] = max(bounds.last, before.get(node, 0))
        spans: dict[str, reads.Span] = {}
        for node, last in through.items():
            after = max(before.get(node, 0), starts.get(node, 1) - 1)
            if last > after:
                spans[node] = (after, last)
        return {**before, **through}, tallied(reads.appended(store, spans))

    def refresh_every(self, seconds: float, stopping: threading.Event) -> None:
        """Refresh until ``stopping`` is set, a refresh every ``seconds`` (from its start)."""
        while not stopping.is_set():
            started = time.monotonic()
            self._guarded(self.refresh)
            stopping.wait(max(seconds - (time.monotonic() - started), 0.0))

    # -- the verifier -----------------------------------------------------------------------

    def verify(self, stopping: threading.Event) -> None:
        """One verify pass over every node (``ledger.store.survey.drifted``), published when whole;
        one that fails is said once on stderr until a pass succeeds."""
        started = time.monotonic()
        store = self._store()
        try:
            found = reads.drifted(store, stopping)
        except PluginError as exc:
            if not self._verify_failing:
                self._report(f"verify pass abandoned: {exc.reason}", True)
            self._verify_failing = True
            return
        finally:
            store.close()
        if found is None:
            return
        self._verify_failing = False
        now = time.monotonic()
        self._publish(drift=Drift(now, time.time(), now - started, found))

    def verify_every(self, seconds: float, stopping: threading.Event) -> None:
        """A verify pass now, then ``seconds`` after each one ends, until ``stopping``."""
        while not stopping.is_set():
            self._guarded(lambda: self.verify(stopping))
            stopping.wait(seconds)

    def _guarded(self, job: Callable[[], object]) -> None:
        """Run one pass of a job; a bug in it is said in one line, and the next pass runs."""
        try:
            job()
        except Exception as exc:
            self._report(f"internal error: {type(exc).__name__}: {exc}", True)
