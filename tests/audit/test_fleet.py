"""``nodes --html DIR``: the fleet on one page, each node's own page beside it, through the
program and in a real browser (headless Chromium, as ``test_history_page`` runs it).

A fleet of 200 nodes of both kinds, laid down in-process: the node that disagrees with its
stream and the full one come first, every row links to a page that exists, and the index and
the pages render. A fleet past the bound is refused in one line and leaves nothing; a directory
that holds anything but an earlier fleet's pages is never written over."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.events import Change
from resource_extend.ledger.store import Store
from resource_extend.projections.changes import NodeAdded, UsageChanged
from resource_extend.projections.gpu.node import GPU
from resource_extend.projections.storage.node import STORAGE
from resource_extend.projections.storage.wire.resources import NodeResource
from tests.audit.browser import chromium_run
from tests.audit.helpers import G, error_line, ok_text, put_head, run, usage_error
from tests.etcdkv import Etcd, upstream_head
from tests.long_stream import grow
from tests.plugin import TRANSPORT, Plugin

TIB = 1 << 40
FLEET = 100
"""Nodes of each kind."""


def store_of(installation: Plugin, kind: Any) -> Store[Any]:
    settings = EtcdConfig(
        machines=installation.endpoints, prefix=installation.prefix, transport=TRANSPORT
    )
    return Store(settings, kind)


def adding(capacity: Any) -> Callable[[Any], Change]:
    """An appender's decision: add the node with ``capacity``."""

    def decide(_: Any) -> Change:
        return NodeAdded(capacity=capacity)

    return decide


def using(delta: Any) -> Callable[[Any], Change]:
    """An appender's decision: take ``delta`` more into use."""

    def decide(_: Any) -> Change:
        return UsageChanged(delta=delta)

    return decide


@pytest.fixture
def gpus(plugin: Plugin) -> Plugin:
    """``FLEET`` GPU nodes of 4 cards, each using (index % 4) of them; gpu-007 uses all 4;
    gpu-042's head says a card more is used than its stream does."""
    store = store_of(plugin, GPU)
    try:
        for index in range(FLEET):
            node = f"gpu-{index:03}"
            store.etcd.renew()
            store.appender.append(node, "add-node", adding({G: 4}))
            used = 4 if index == 7 else index % 4 % 3
            if used:
                store.appender.append(node, "set-node-resource-usage", using({G: used}))
    finally:
        store.close()
    return plugin


@pytest.fixture
def disks(storage: Plugin) -> Plugin:
    """``FLEET`` storage nodes of two 1T volumes; disk-013's /data1 is full."""
    store = store_of(storage, STORAGE)
    try:
        for index in range(FLEET):
            node = f"disk-{index:03}"
            capacity = NodeResource(volumes={"/data0": TIB, "/data1": TIB}, storage=2 * TIB)
            store.etcd.renew()
            store.appender.append(node, "add-node", adding(capacity))
            taken = TIB if index == 13 else (index % 5) << 30
            if taken:
                delta = NodeResource(volumes={"/data1": taken}, storage=taken)
                store.appender.append(node, "set-node-resource-usage", using(delta))
    finally:
        store.close()
    return storage


class Links(HTMLParser):
    """The index's rows: each row's class and the page it links to."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.rows: list[tuple[str, str]] = []
        self._row_class = ""
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr":
            self._row_class = found.get("class") or ""
        if tag == "a":
            self.rows.append((self._row_class, unquote(found.get("href") or "")))


def written(installation: Plugin, directory: Path, *options: str) -> str:
    return ok_text(run(installation, "nodes", "--html", str(directory), *options)).strip()


def test_a_fleet_of_both_kinds_lists_the_disagreeing_and_full_first_and_every_page_renders(
    gpus: Plugin, disks: Plugin, etcd: Etcd, chromium: str, tmp_path: Path
) -> None:
    found = etcd.head("gpu-042")
    assert found is not None
    put_head(etcd, "gpu-042", {**found.json(), "usage": {"prod_count_map": {G: 3}}})
    for installation, first, full, out in (
        (gpus, "gpu-042", "gpu-007", tmp_path / "gpu"),
        (disks, None, "disk-013", tmp_path / "storage"),
    ):
        said = written(installation, out)
        assert said.startswith(f"wrote {out / 'index.html'}: {FLEET} nodes (")
        index = (out / "index.html").read_text()
        rows = Links(index).rows
        assert len(rows) == FLEET
        leading = [name for _, name in rows[: 2 if first else 1]]
        expected = [f"node-{first}.html", f"node-{full}.html"] if first else [f"node-{full}.html"]
        assert leading == expected, leading
        assert rows[0][0] == ("disagrees" if first else "full")
        for _, page in rows:
            assert (out / page).is_file(), page
        assert sorted(p.name for p in out.iterdir()) == sorted(
            ["index.html", *(p for _, p in rows)]
        )
        assert "<script" not in index and not re.search(r'(src|href)="https?:', index)

        dom = chromium_run(chromium, out / "index.html", "--window-size=1280,800", "--dump-dom")
        assert dom.stdout.count('<tr class="') == FLEET
        for _, page in (rows[0], rows[FLEET // 2], rows[-1]):  # the first, one between, the last
            shown = chromium_run(chromium, out / page, "--window-size=1280,800", "--dump-dom")
            assert "<h1>" in shown.stdout and '<tr id="e1"' in shown.stdout, page
    assert "verify: disagrees" in (tmp_path / "gpu" / "node-gpu-042.html").read_text()
    index = (tmp_path / "storage" / "index.html").read_text()
    assert "volume /data1 1T/1T" in index and "/dev/vda" not in index


def test_a_fleet_past_its_bound_is_refused_in_one_line_and_leaves_nothing(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """2,001 upstream records (one head each, no stream) are one node too many; --match selects
    fewer."""
    record = json.dumps(upstream_head({G: 1}, {})).encode()
    etcd.put_many({etcd.head_key(f"n{index:04}"): record for index in range(2001)})
    before = sorted(tmp_path.iterdir())
    out = tmp_path / "fleet"
    line = error_line(run(plugin, "nodes", "--html", str(out)), "nodes")
    assert "2,001 nodes selected: a fleet's pages hold at most 2,000; select fewer with" in line
    assert sorted(tmp_path.iterdir()) == before, "the refusal left something behind"
    said = written(plugin, out, "--match", "n000*", "--match", "n1999")
    assert said.startswith(f"wrote {out / 'index.html'}: 11 nodes")
    assert "Selected: --match &#x27;n000*&#x27; --match n1999" in (out / "index.html").read_text()


def test_a_node_past_one_pages_bound_is_named(plugin: Plugin, tmp_path: Path) -> None:
    store = store_of(plugin, GPU)
    try:
        grow(store, "long", 20_001)
    finally:
        store.close()
    plugin.add("short", {G: 1})
    line = error_line(run(plugin, "nodes", "--html", str(tmp_path / "fleet")), "nodes")
    assert "node long has 20,001 events: a page holds at most 20,000" in line
    assert not (tmp_path / "fleet").exists()
    assert "1 node" in written(plugin, tmp_path / "fleet", "--match", "short")


def test_only_a_new_or_empty_directory_or_an_earlier_fleet_is_written(
    plugin: Plugin, tmp_path: Path
) -> None:
    plugin.add("n1", {G: 2})
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "1 node" in written(plugin, empty)
    plugin.add("n2", {G: 2})
    assert "2 nodes" in written(plugin, empty)  # an earlier fleet's pages: replaced
    assert sorted(p.name for p in empty.iterdir()) == ["index.html", "node-n1.html", "node-n2.html"]

    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    line = error_line(run(plugin, "nodes", "--html", str(kept)), "nodes")
    assert "holds files that are not an earlier fleet's pages" in line
    assert [p.name for p in kept.iterdir()] == ["notes.txt"]
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert "is a file" in usage_error(run(plugin, "nodes", "--html", str(a_file)))
    nowhere = tmp_path / "missing" / "fleet"
    assert "is not a directory" in error_line(run(plugin, "nodes", "--html", str(nowhere)), "nodes")
    both = run(plugin, "nodes", "--json", "--html", str(tmp_path / "x"))
    assert "--json and --html" in usage_error(both)
    archive_alone = run(plugin, "nodes", "--archive", str(tmp_path))
    assert "--archive is for the pages --html writes" in usage_error(archive_alone)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_no_two_nodes_share_a_page(plugin: Plugin, tmp_path: Path) -> None:
    """Round six: a name too long to quote took ``node-<digest>.html``, and a 32-hex-digit name
    is its own quoted form, so a node named the long one's digest shared its page (both rows
    linked one file). The digest form is one ``quote`` never writes."""
    import hashlib

    long = "n" * 210
    digest = hashlib.sha256(long.encode()).hexdigest()[:32]
    for name in (long, digest):
        plugin.add(name, {G: 1})
    out = tmp_path / "fleet"
    assert "2 nodes" in written(plugin, out)
    pages = {page for _, page in Links((out / "index.html").read_text()).rows}
    assert len(pages) == 2, pages
    holding = [[p for p in pages if name in (out / p).read_text()] for name in (long, digest)]
    assert sorted(len(found) for found in holding) == [1, 1], holding  # each on its own page
    assert holding[0] != holding[1]
    assert sorted(p.name for p in out.iterdir()) == sorted(["index.html", *pages])

    for name in ("Gpu-1", "gpu-1"):  # one file where a file system folds case: not here
        plugin.add(name, {G: 1})
    again = tmp_path / "again"
    assert "4 nodes" in written(plugin, again)
    pages = {page for _, page in Links((again / "index.html").read_text()).rows}
    assert len({page.casefold() for page in pages}) == 4, pages


def test_an_earlier_fleet_s_directory_holding_anything_else_is_refused_by_name(
    plugin: Plugin, tmp_path: Path
) -> None:
    """Round six: DIR was taken as an earlier fleet's when its index said so, and all else in
    it (an auditor's notes, a directory of evidence) was moved aside with the old pages and
    deleted. Now every entry must be a page the index links to; the rest is named, and DIR and
    its parent are left as they were."""
    plugin.add("n1", {G: 2})
    out = tmp_path / "fleet"
    written(plugin, out)
    (out / "notes.txt").write_text("mine")
    (out / "evidence").mkdir()
    (out / "evidence" / "scan.txt").write_text("kept")
    (out / "node-n9.html").write_text("a page no index links to")
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    beside = sorted(tmp_path.iterdir())
    line = error_line(run(plugin, "nodes", "--html", str(out)), "nodes")
    assert line == (
        f"resource-gpu nodes: {out} holds files that are not an earlier fleet's pages: "
        "evidence/, node-n9.html, notes.txt; give a new or empty directory, or move them out; "
        "nothing was written"
    ), line
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before
    assert sorted(tmp_path.iterdir()) == beside


def test_a_fleet_written_over_from_inside_its_directory_leaves_nothing_beside(
    plugin: Plugin, tmp_path: Path
) -> None:
    """Round six: ``nodes --html .`` inside an earlier fleet's DIR made its aside directory
    inside DIR, failed to move ``.`` (EBUSY), left the aside directory behind (one more a run)
    and named a node in its error. DIR is resolved first: the pages are rewritten in place."""
    plugin.add("n1", {G: 2})
    out = tmp_path / "fleet"
    written(plugin, out)
    plugin.add("n2", {G: 2})
    again = plugin.run("nodes", None, "--html", ".", cwd=out)
    assert again.status == 0, again.stderr
    assert again.stdout.startswith(f"wrote {out / 'index.html'}: 2 nodes"), again.stdout
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "node-n1.html", "node-n2.html"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    (out / "notes.txt").write_text("mine")
    line = error_line(plugin.run("nodes", None, "--html", ".", cwd=out), "nodes")
    assert line.startswith(f"resource-gpu nodes: {out} holds files"), line  # no node named
    assert sorted(p.name for p in out.iterdir()) == [
        "index.html", "node-n1.html", "node-n2.html", "notes.txt"
    ]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("control", ["\u202e", "\u2066"])
def test_a_bidi_control_in_a_volume_s_name_is_shown_on_every_page(
    storage: Plugin, tmp_path: Path, control: str
) -> None:
    """Round six: a volume (a host path) named with U+202E was written raw on the fleet's
    page, the node's and ``history --html``'s, and the rest of its line showed right to left
    (an auditor read another size or name). It is shown by its code point, never raw nor as a
    character reference."""
    volume = f"/data/{control}G01"
    storage.ok("add-node", {"nodename": "s1", "resource": {"volumes": [f"{volume}:10G"]}})
    out = tmp_path / "fleet"
    ok_text(run(storage, "nodes", "--html", str(out)))
    history = tmp_path / "s1.html"
    ok_text(run(storage, "history", "s1", "--html", str(history)))
    shown = f"[U+{ord(control):04X}]"
    for page in (out / "index.html", out / "node-s1.html", history):
        text = page.read_text()
        assert control not in text, page
        references = (f"&#x{ord(control):x};", f"&#{ord(control)};")
        assert not [ref for ref in references if ref in text.lower()], page
        assert f"/data/{shown}G01" in text, page
