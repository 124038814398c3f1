"""Keys under the prefix that name no node (someone else's: not UTF-8, a terminal escape, a
line break): every listing leaves them out and reports each quoted, and none stops the rest.
One such head key made ``nodes``, ``verify --all``, ``compact --all`` and ``doctor`` exit 70
(``UnicodeEncodeError``) and the exporter serve ``etcd_up 0``; an escape reached the auditor's
terminal raw."""

from __future__ import annotations

import json

import pytest

from tests.audit.helpers import G
from tests.etcdkv import Etcd
from tests.plugin import Plugin
from tests.test_exporter import Exporter, exporters, start  # noqa: F401 (a fixture)

pytestmark = pytest.mark.grpc

RECORD = b'{"capacity":{"prod_count_map":{"x":1}},"usage":{"prod_count_map":{}}}'
FOREIGN = {
    b"bad\xff": "bad\\\\xff",  # not UTF-8
    b"esc\x1b]0;owned\x07": "esc\\x1b]0;owned\\x07",  # a terminal title change
    b"fake\r\nall nodes agree": "fake\\r\\nall nodes agree",  # a line of its own
}
"""Each key's node segment, and how it is shown (quoted: escapes as escapes)."""


@pytest.fixture
def planted(plugin: Plugin, etcd: Etcd) -> Plugin:
    plugin.add("n1", {G: 2})
    for segment in FOREIGN:
        etcd.client.put(etcd.root.encode() + segment, RECORD)
        etcd.client.put(etcd.events_root.encode() + segment + b"/000000000001", b"{}")
    return plugin


def quoted_reports(stderr: str, command: str) -> list[str]:
    lines = stderr.splitlines()
    assert all(line.startswith(f"resource-gpu {command}: '") for line in lines), lines
    assert all("names no node" in line and "left as it is" in line for line in lines), lines
    return lines


@pytest.mark.parametrize(
    "argv",
    [["nodes"], ["nodes", "--json"], ["verify", "--all"], ["compact", "--all", "--keep", "3"]],
    ids=" ".join,
)
def test_every_listing_leaves_them_out_and_says_so_quoted(planted: Plugin, argv: list[str]) -> None:
    done = planted.run(argv[0], None, *argv[1:])
    assert done.status == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\r" not in done.stdout + done.stderr
    assert "\udcff" not in done.stdout + done.stderr
    reports = quoted_reports(done.stderr, argv[0])
    # each key twice over (its head and its stream), each said once
    assert len(reports) == 2 * len(FOREIGN), reports
    for shown in FOREIGN.values():
        assert sum(shown in line for line in reports) == 2, (shown, reports)
    if argv == ["nodes", "--json"]:
        assert [row["nodename"] for row in json.loads(done.stdout)] == ["n1"]
    elif argv[0] == "nodes":
        assert done.stdout.splitlines()[1].split()[0] == "n1" and len(done.stdout.splitlines()) == 2


def test_doctor_warns_of_them_quoted(planted: Plugin) -> None:
    done = planted.run("doctor", None, "--json")
    findings = {f["check"]: f for f in json.loads(done.stdout)}
    foreign = findings["foreign keys"]
    assert foreign["status"] == "warn", foreign
    for shown in FOREIGN.values():
        assert shown in foreign["message"], foreign
    assert "\x1b" not in done.stdout and "\r" not in done.stdout.replace("\\r", "")
    assert findings["drift"]["status"] == "ok", findings["drift"]


def test_the_exporter_stays_up_beside_them(
    planted: Plugin,
    exporters: list[Exporter],  # noqa: F811 (the fixture)
) -> None:
    exporter = start(exporters, planted)
    scraped = exporter.wait(lambda s: exporter.get(s, "nodes") == 1, "one node")
    assert exporter.get(scraped, "etcd_up") == 1
    assert scraped.series(exporter.name("capacity_cards")) == {
        frozenset({("nodename", "n1"), ("product", G)}): 2
    }
