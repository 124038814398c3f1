"""``history NODE --html FILE``, through the program and in a real browser: headless Chromium
(``browser``) opens each page written, and the test reads what it rendered: the DOM after
parsing (``--dump-dom``: the charts, the table's rows, the verdict), a screenshot's pixels (the
usage areas are drawn), and, at common window sizes, the layout itself. A GPU node's page and a
storage node's, a page with no events, and one of 10,000 events.

Where Chromium is missing these tests fail, saying how to install it; a developer without it
may set ``RESOURCE_EXTEND_NO_BROWSER=1`` to skip them knowingly (CI never does)."""

from __future__ import annotations

import html
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from resource_extend.ledger.store import Store
from resource_extend.projections.changes import UsageRebuilt
from resource_extend.projections.gpu.node import NodeState
from tests.audit.browser import chromium_run
from tests.audit.helpers import G, error_line, ok_text, run, take, usage_error
from tests.long_stream import grow
from tests.plugin import Plugin

USAGE = ((0xAE, 0xD6, 0xF1), (0x28, 0x74, 0xA6))
"""The usage areas' fill and edge (``commands.audit.page.STYLE``): 10,000 events a millisecond
apart, each taking a card or giving it back, draw an edge so dense no fill shows between."""


class Rendered:
    """A page as Chromium rendered it: its DOM after parsing, and a screenshot."""

    def __init__(self, browser: str, page: Path) -> None:
        window = "--window-size=1000,1200"
        self.dom = chromium_run(browser, page, window, "--dump-dom").stdout
        shot = page.with_suffix(".png")
        chromium_run(browser, page, window, f"--screenshot={shot}")
        with Image.open(shot) as image:
            counted = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
        self.colours: dict[Any, int] = {colour: count for count, colour in counted}

    @staticmethod
    def printed(browser: str, page: Path) -> bytes:
        """The page as Chromium prints it to PDF."""
        pdf = page.with_suffix(".pdf")
        chromium_run(browser, page, "--no-pdf-header-footer", f"--print-to-pdf={pdf}")
        return pdf.read_bytes()

    def count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.dom))

    def usage_drawn(self) -> int:
        """How many pixels of the screenshot are a usage area's (within a few shades: strokes
        drawn over each other blend a little)."""

        def near(colour: Any) -> bool:
            return any(max(abs(a - b) for a, b in zip(colour, u, strict=True)) <= 8 for u in USAGE)

        return sum(count for colour, count in self.colours.items() if near(colour))


MEASURE = """<script>
const lines = (cell) => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
};
const width = document.body.clientWidth;
const rows = [...document.querySelectorAll("table.events tbody tr")];
document.body.dataset.measured = JSON.stringify({
  width: width,
  wrapped: rows.flatMap((row) => [...row.cells].slice(0, 6)
    .filter((cell) => lines(cell) > 1).map((cell) => cell.textContent)),
  charts: [...document.querySelectorAll("svg.chart")].map(
    (svg) => svg.getBoundingClientRect().right - document.querySelector("h1")
      .getBoundingClientRect().left),
  levels: [...document.querySelectorAll("figure")].map(
    (figure) => [...figure.querySelectorAll(".level")].map((label) => label.textContent)),
  overflow: document.documentElement.scrollWidth > window.innerWidth,
});
</script>"""
"""What the tests measure of a page as Chromium laid it out, put in a copy of the page (the page
itself holds no script): the id cells that wrap, how far each chart reaches, each chart's
gridline labels, whether anything runs off the window."""


def measured(browser: str, page: Path, window: tuple[int, int]) -> dict[str, Any]:
    """The page laid out in a window of ``window`` pixels: ``MEASURE``'s findings."""
    copy = page.with_name(f"{page.stem}.{window[0]}x{window[1]}.html")
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = chromium_run(browser, copy, f"--window-size={window[0]},{window[1]}", "--dump-dom")
    found = re.search(r'data-measured="([^"]*)"', dom.stdout)
    assert found, "the measuring script did not run"
    result: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return result


def page_of(plugin: Plugin, node: str, path: Path, *options: str) -> str:
    """Write ``node``'s page to ``path``; the line the program answered."""
    return ok_text(run(plugin, "history", node, "--html", str(path), *options)).strip()


def test_a_gpu_nodes_page_renders_its_charts_marks_and_table(
    plugin: Plugin, chromium: str, tmp_path: Path
) -> None:
    plugin.ok("add-node", {"nodename": "n1", "resource": {"prod_count_map": {G: 4, "a100": 2}}})
    for _ in range(3):
        plugin.ok(*take("n1", {G: 1}))
    plugin.ok("fix-node-resource", {"nodename": "n1", "workloads_resource": []})
    page = tmp_path / "n1.html"
    said = page_of(plugin, "n1", page)
    assert said == f"wrote {page}: node n1, 5 events; verify: agrees"

    shown = Rendered(chromium, page)
    assert shown.count(r'<svg class="chart"') == 1  # the 3090's; the a100s were never used:
    assert "never used over these events: a100 (of 2)" in shown.dom
    assert shown.count(r'<tr id="e\d+"') == 5
    assert shown.count(r'<a href="#e\d+"><line') == 5 + 1  # ticks, and the fix ruled
    assert "verify: the head agrees with the stream" in shown.dom
    assert "usage_rebuilt" in shown.dom and "diffs:" in shown.dom
    assert shown.usage_drawn() > 2000, "no usage area was drawn"
    pdf = Rendered.printed(chromium, page)
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", pdf)) >= 1


def deployed(storage: Plugin, node: str, deploys: int) -> None:
    """A storage node of one 1T volume behind a disk, and ``deploys`` workloads of 300G each
    with read IOPS, one after another (the first's usage spans the time to the second)."""
    resource = {
        "volumes": ["/data0:1T"],
        "storage": "100G",
        "disks": ["/dev/vda:/data0:1000:1000:1G:1G"],
    }
    storage.ok("add-node", {"nodename": node, "resource": resource})
    request = {"volumes-request": ["AUTO:/data:rw:300G"], "volumes-limit": ["AUTO:/data:rw:300G"]}
    for _ in range(deploys):
        planned = storage.ok(
            "calculate-deploy",
            {"nodename": node, "deploy_count": 1, "workload_resource_request": request},
        )
        storage.ok(
            "set-node-resource-usage",
            {"nodename": node, "workloads_resource": planned["workloads_resource"],
             "delta": True, "incr": True},
        )  # fmt: skip


def test_a_storage_nodes_page_charts_volumes_storage_and_disks(
    storage: Plugin, chromium: str, tmp_path: Path
) -> None:
    deployed(storage, "d1", 2)
    page = tmp_path / "d1.html"
    page_of(storage, "d1", page)

    shown = Rendered(chromium, page)
    for chart in ("volume /data0", "storage"):
        assert f'aria-label="{chart}"' in shown.dom
    assert shown.count(r'<tr id="e\d+"') == 3
    assert shown.usage_drawn() > 2000, "no usage area was drawn"


@pytest.mark.parametrize("window", [(1280, 800), (1920, 1080)])
def test_at_common_window_sizes_ids_never_wrap_and_charts_fill_the_width(
    storage: Plugin, chromium: str, tmp_path: Path, window: tuple[int, int]
) -> None:
    """A storage node's page (its cells are the widest): no seq, time, verb, kind, op or writer
    wraps; every chart reaches across the page, its gridlines labelled; nothing runs off."""
    deployed(storage, "d1", 3)
    page = tmp_path / "d1.html"
    page_of(storage, "d1", page)
    found = measured(chromium, page, window)
    assert found["wrapped"] == []
    assert found["charts"] and all(reach >= 0.9 * found["width"] for reach in found["charts"])
    assert all(len(labels) >= 3 and labels[0] == "0" for labels in found["levels"]), found
    assert ["0", "256G", "512G", "768G", "1T"] in found["levels"]  # /data0's, as eru writes it
    assert not found["overflow"]
    shown = page.read_text()
    assert "<script" not in shown
    assert "never used over these events: /dev/vda read IOPS (of 1,000), /dev/vda write" in shown
    for said in ("<dt>etcd</dt>", "<dt>prefix</dt>", "<dt>command</dt>", "<dt>made by</dt>"):
        assert said in shown
    assert "history d1 --html" in shown and "Over these events" in shown


def test_a_page_with_no_events_renders_and_says_so(
    plugin: Plugin, chromium: str, tmp_path: Path
) -> None:
    plugin.ok("add-node", {"nodename": "n1", "resource": {"prod_count_map": {G: 4}}})
    page = tmp_path / "none.html"
    said = page_of(plugin, "n1", page, "--since", "99")
    assert said == f"wrote {page}: node n1, 0 events; verify: agrees"

    shown = Rendered(chromium, page)
    assert "No events match." in shown.dom and "Selected: --since 99" in shown.dom
    assert shown.count(r"<svg") == 0 and shown.count(r'<tr id="e') == 0
    assert shown.count(r"<th>") > 0  # the table's header
    assert shown.usage_drawn() == 0


def test_a_page_of_10000_events_renders_them_all(
    plugin: Plugin, store: Store[NodeState], chromium: str, tmp_path: Path
) -> None:
    grow(store, "long", 10_000)
    page = tmp_path / "long.html"
    page_of(plugin, "long", page)

    shown = Rendered(chromium, page)
    assert shown.count(r'<tr id="e\d+"') == 10_000
    assert shown.count(r'<svg class="chart"') == 1
    assert shown.usage_drawn() > 2000, "no usage area was drawn"


def test_bad_pages_are_one_line_and_write_nothing(plugin: Plugin, tmp_path: Path) -> None:
    plugin.ok("add-node", {"nodename": "n1", "resource": {"prod_count_map": {G: 4}}})
    pages = tmp_path / "pages"
    pages.mkdir()
    both = run(plugin, "history", "n1", "--json", "--html", str(pages / "p.html"))
    assert "--json and --html" in usage_error(both)
    nowhere = pages / "missing" / "p.html"
    line = error_line(run(plugin, "history", "n1", "--html", str(nowhere)), "history")
    assert "cannot write" in line and str(nowhere) in line
    unknown = error_line(run(plugin, "history", "n9", "--html", str(pages / "p.html")), "history")
    assert "never known" in unknown
    assert list(pages.iterdir()) == [], "a page was left behind"


def test_a_relative_file_is_written_where_the_command_ran(plugin: Plugin, tmp_path: Path) -> None:
    plugin.ok("add-node", {"nodename": "n1", "resource": {"prod_count_map": {G: 4}}})
    done = plugin.run("history", None, "n1", "--html", "n1.html", cwd=tmp_path)
    assert ok_text(done).strip() == "wrote n1.html: node n1, 1 event; verify: agrees"
    assert (tmp_path / "n1.html").read_text().startswith("<!DOCTYPE html>")


def test_a_page_of_more_than_20000_events_is_refused_saying_how_to_select_fewer(
    plugin: Plugin, store: Store[NodeState], tmp_path: Path
) -> None:
    grow(store, "long", 20_002)
    page = tmp_path / "long.html"
    whole = error_line(run(plugin, "history", "long", "--html", str(page)), "history")
    assert "20,002 events selected: a page holds at most 20,000; select fewer with" in whole
    kind = run(plugin, "history", "long", "--kind", "usage_changed", "--html", str(page))
    assert "20,001 events selected" in error_line(kind, "history")  # counted once selected
    fixed: UsageRebuilt[dict[str, int]] = UsageRebuilt(
        usage={}, diffs=["a card counted, none held"]
    )
    store.etcd.renew()  # a call's budget of its own: laying the stream down may have spent it
    store.appender.append("long", "fix-node-resource", lambda _: fixed)  # event 20,003
    ends = ["--kind", "node_added", "--kind", "usage_rebuilt", "--html", str(page)]
    line = error_line(run(plugin, "history", "long", *ends), "history")
    assert "20,003 events the charts would follow: a page holds at most 20,000" in line

    assert not page.exists()
    said = page_of(plugin, "long", page, "--since", "4")
    assert said == f"wrote {page}: node long, 20,000 events; verify: agrees"


def test_a_page_to_dash_is_printed(plugin: Plugin) -> None:
    plugin.ok("add-node", {"nodename": "n1", "resource": {"prod_count_map": {G: 4}}})
    page = ok_text(run(plugin, "history", "n1", "--html", "-"))
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert '<tr id="e1" class="k-node_added">' in page


def targets(tmp_path: Path) -> dict[str, Path]:
    """What a page path may turn out to be, other than a regular file or a directory (which
    click refuses): a FIFO, a link (to a file), and, where this runs as root, a device node of
    its own (never the host's /dev/null)."""
    fifo, link = tmp_path / "fifo", tmp_path / "link"
    os.mkfifo(fifo)
    (tmp_path / "kept.html").write_text("kept")
    link.symlink_to(tmp_path / "kept.html")
    found = {"a FIFO": fifo, "a link": link}
    if os.geteuid() == 0:
        device = tmp_path / "null"
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        found["a character device"] = device
    return found


def test_a_page_is_never_written_over_anything_but_a_regular_file(
    plugin: Plugin, tmp_path: Path
) -> None:
    """``--html /dev/null`` or ``--html /dev/stdout`` must not turn the device (or the link)
    into a file of HTML: each is refused in one line, and stays what it was."""
    plugin.ok("add-node", {"nodename": "n1", "resource": {"prod_count_map": {G: 4}}})
    for kind, path in targets(tmp_path).items():
        before = os.lstat(path)
        line = error_line(run(plugin, "history", "n1", "--html", str(path)), "history")
        assert f"{path} is {kind}, not a regular file: left as it is" in line, line
        assert "- for stdout" in line
        after = os.lstat(path)
        assert (after.st_mode, after.st_ino, after.st_rdev) == (
            before.st_mode, before.st_ino, before.st_rdev
        ), kind  # fmt: skip
    assert (tmp_path / "kept.html").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
