"""``exporter``: the ledger's metrics scraped over real HTTP from the real command, against
real etcd, and read with prometheus-client's own parser: each node's capacity and use, its
stream, appends, lost compare-and-swaps and writes that gave up as the ledger recorded them,
heads that drifted from their streams, etcd going away and coming back, SIGTERM, bad input."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.errors import Contention
from resource_extend.ledger.model.events import Change
from resource_extend.ledger.store import Store
from resource_extend.projections.gpu.events import UsageChanged
from resource_extend.projections.gpu.node import GPU, NodeState
from tests.audit.helpers import take
from tests.etcd_server import Cluster, free_port
from tests.etcdkv import Etcd
from tests.plugin import TRANSPORT, Plugin, binary, failure_line
from tests.secured_etcd import add_user, start_auth_member

G = "nvidia-3090"
A = "nvidia-a100"
TiB = 2**40
Labels = frozenset[tuple[str, str]]


class Scrape:
    """One scrape, parsed by prometheus-client: its families by name, their samples."""

    def __init__(self, text: str, content_type: str) -> None:
        self.text = text
        self.content_type = content_type
        self.families = {f.name: f for f in text_string_to_metric_families(text)}

    def series(self, sample: str) -> dict[Labels, float]:
        """Every sample called ``sample`` (a counter's ends in ``_total``), by its labels."""
        return {
            frozenset(s.labels.items()): s.value
            for family in self.families.values()
            for s in family.samples
            if s.name == sample
        }

    def value(self, sample: str, **labels: str) -> float | None:
        return self.series(sample).get(frozenset(labels.items()))

    def sample_names(self) -> set[str]:
        return {s.name for family in self.families.values() for s in family.samples}


class Exporter:
    """``<program> exporter`` running for one test, reading etcd every 0.2 s, on a free port;
    stopped with SIGTERM, which it must answer by exiting 0 with nothing on stderr."""

    def __init__(self, plugin: Plugin, *args: str, open_files: int | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k != "ERU_RESOURCE_CONFIG_PATH"}
        env["HOME"] = str(plugin.workdir / "home")
        argv = [*binary(plugin.program), "--config", str(plugin.config), "exporter"]
        options = ["--listen", "127.0.0.1:0", "--every", "0.2", "--verify-every", "0.5", *args]
        self.prefix = plugin.program.replace("-", "_") + "_"
        self.process = subprocess.Popen(
            [*argv, *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            preexec_fn=None if open_files is None else lambda: limit_open_files(open_files),
        )  # fmt: skip
        assert self.process.stdout is not None
        first = self.process.stdout.readline().decode()
        assert first.startswith("serving http://127.0.0.1:"), (first, self._errors())
        self.url = first.split()[-1]
        self.first_line = first

    def _errors(self) -> str:
        if self.process.poll() is None:
            return ""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode()

    def scrape(self) -> Scrape:
        with urllib.request.urlopen(self.url, timeout=10) as reply:
            return Scrape(reply.read().decode(), reply.headers["Content-Type"])

    def wait(self, condition: Callable[[Scrape], bool], what: str, timeout: float = 30) -> Scrape:
        """The first scrape ``condition`` holds of (one every 0.1 s)."""
        deadline = time.monotonic() + timeout
        while True:
            scraped = self.scrape()
            if condition(scraped):
                return scraped
            if time.monotonic() > deadline:
                raise AssertionError(f"never {what}:\n{scraped.text[-3000:]}")
            time.sleep(0.1)

    def name(self, metric: str) -> str:
        return self.prefix + metric

    def get(self, scraped: Scrape, metric: str, **labels: str) -> float | None:
        return scraped.value(self.name(metric), **labels)

    def stop(self, stop: int = signal.SIGTERM) -> tuple[str, str]:
        """Stop it; its stdout after the first line, and its stderr."""
        if self.process.poll() is None:
            self.process.send_signal(stop)
        try:
            out, err = self.process.communicate(timeout=30)
        finally:
            self.process.kill()
        assert self.process.returncode == 0, err
        return out.decode(), err.decode()


@pytest.fixture
def exporters() -> Iterator[list[Exporter]]:
    """Every exporter a test starts is stopped when it ends (killed if it will not stop)."""
    started: list[Exporter] = []
    yield started
    for each in started:
        if each.process.poll() is None:
            each.process.kill()
            each.process.communicate()


def limit_open_files(soft: int) -> None:
    """This process's soft limit on open files (the hard limit kept)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard), hard))


def start(
    exporters: list[Exporter], plugin: Plugin, *args: str, open_files: int | None = None
) -> Exporter:
    started = Exporter(plugin, *args, open_files=open_files)
    exporters.append(started)
    return started


def nodes_listed(plugin: Plugin) -> dict[str, int]:
    """Each node's stream length as ``nodes --json`` counts it."""
    listed = plugin.run("nodes", None, "--json")
    assert listed.status == 0, listed.stderr
    return {row["nodename"]: row["events"] for row in json.loads(listed.stdout)}


# -- what is served -------------------------------------------------------------------------


def test_gpu_capacity_usage_and_streams_per_node_as_the_ledger_holds_them(
    plugin: Plugin, exporters: list[Exporter]
) -> None:
    plugin.add("n1", {G: 4, A: 2})
    plugin.ok(*take("n1", {G: 1}))
    plugin.ok(*take("n1", {G: 2}))
    plugin.add("n2", {A: 8})
    compacted = plugin.run("compact", None, "n1", "--keep", "1", "--min-age", "0")
    assert compacted.status == 0, compacted.stderr
    exporter = start(exporters, plugin)
    scraped = exporter.wait(lambda s: exporter.get(s, "nodes") == 2, "two nodes")

    assert exporter.get(scraped, "etcd_up") == 1
    assert scraped.content_type.startswith("text/plain; version=0.0.4")
    assert scraped.series(exporter.name("capacity_cards")) == {
        frozenset({("nodename", "n1"), ("product", G)}): 4,
        frozenset({("nodename", "n1"), ("product", A)}): 2,
        frozenset({("nodename", "n2"), ("product", A)}): 8,
    }
    assert scraped.series(exporter.name("used_cards")) == {
        frozenset({("nodename", "n1"), ("product", G)}): 3,
        frozenset({("nodename", "n1"), ("product", A)}): 0,
        frozenset({("nodename", "n2"), ("product", A)}): 0,
    }
    # A compacted stream counts its checkpoint, as ``nodes`` does: 2 events for n1, not 3.
    events = scraped.series(exporter.name("stream_events"))
    listed = nodes_listed(plugin)
    assert listed == {"n1": 2, "n2": 1}
    assert events == {frozenset({("nodename", n)}): float(count) for n, count in listed.items()}
    ages = scraped.series(exporter.name("last_event_age_seconds"))
    assert set(ages) == {frozenset({("nodename", "n1")}), frozenset({("nodename", "n2")})}
    assert all(0 <= age < 120 for age in ages.values()), ages
    assert exporter.get(scraped, "last_refresh_timestamp_seconds") == pytest.approx(
        time.time(), abs=60
    )

    # Prometheus' conventions: gauges and _total counters, units in names, no node in a name.
    types = {name: family.type for name, family in scraped.families.items()}
    assert types[exporter.name("capacity_cards")] == "gauge"
    for counter in ("appends", "cas_retries", "write_failures"):
        assert types[exporter.name(counter)] == "counter", counter
    own = set(scraped.families) - {"resource_extend_build_info"}  # shared by both programs
    assert all(name.startswith(exporter.prefix) for name in own)
    assert not [name for name in scraped.sample_names() if "n1" in name or "n2" in name]

    assert exporter.stop() == (f"stopped serving {exporter.url}\n", "")


def test_storage_volumes_storage_and_disk_quotas_per_node(
    storage: Plugin, exporters: list[Exporter]
) -> None:
    node = {
        "volumes": ["/data0:1T", "/data1:2T"],
        "disks": ["/dev/vda:/,/data0,/data1:1000:2000:1G:2G"],
        "storage": "4T",
    }
    storage.ok("add-node", {"nodename": "s1", "resource": node})
    used = {
        "volumes": {"/data0": 2**30},
        "disks": [{"device": "/dev/vda", "read_IOPS": 10, "write_IOPS": 20,
                   "read_bps": 300, "write_bps": 400}],
        "storage": 2**31,
    }  # fmt: skip
    request = {"nodename": "s1", "resource": used, "delta": True, "incr": True}
    storage.ok("set-node-resource-usage", request)
    exporter = start(exporters, storage)
    scraped = exporter.wait(lambda s: exporter.get(s, "nodes") == 1, "the node")

    def get(metric: str, **labels: str) -> float | None:
        return exporter.get(scraped, metric, nodename="s1", **labels)

    assert exporter.name("capacity_cards") not in scraped.families
    assert get("volume_capacity_bytes", volume="/data0") == TiB
    assert get("volume_capacity_bytes", volume="/data1") == 2 * TiB
    assert get("volume_used_bytes", volume="/data0") == 2**30
    assert get("volume_used_bytes", volume="/data1") == 0
    assert get("capacity_bytes") == 7 * TiB  # the volumes, and 4T besides
    assert get("used_bytes") == 2**31
    quota = {
        ("iops", "read"): 1000,
        ("iops", "write"): 2000,
        ("bytes_per_second", "read"): 2**30,
        ("bytes_per_second", "write"): 2**31,
    }
    taken = {("iops", "read"): 10, ("iops", "write"): 20,
             ("bytes_per_second", "read"): 300, ("bytes_per_second", "write"): 400}  # fmt: skip
    for (unit, direction), value in quota.items():
        assert get(f"disk_capacity_{unit}", device="/dev/vda", direction=direction) == value
    for (unit, direction), value in taken.items():
        assert get(f"disk_used_{unit}", device="/dev/vda", direction=direction) == value
    assert get("stream_events") == 2
    assert exporter.stop()[1] == ""


# -- counted from the ledger ----------------------------------------------------------------


def store_of(plugin: Plugin, **settings: Any) -> Store[NodeState]:
    config = EtcdConfig(machines=plugin.endpoints, prefix=plugin.prefix, transport=TRANSPORT)
    return Store(msgspec.structs.replace(config, **settings), GPU)


def losing_to(rival: Store[NodeState], verb: str) -> Callable[[NodeState | None], Change]:
    """A decision whose first call lets ``rival`` write the node first (as ``verb``): the
    compare-and-swap that follows is lost."""
    calls = 0

    def decide(state: NodeState | None) -> Change:
        nonlocal calls
        calls += 1
        if calls == 1:
            rival.appender.append("n1", verb, lambda _: UsageChanged(delta={G: 0}))
        return UsageChanged(delta={G: 1})

    return decide


def test_appends_lost_compare_and_swaps_and_failed_writes_are_counted_by_verb(
    plugin: Plugin, etcd: Etcd, exporters: list[Exporter]
) -> None:
    plugin.add("n1", {G: 8})  # before the exporter starts: not counted
    exporter = start(exporters, plugin)
    exporter.wait(lambda s: exporter.get(s, "nodes") == 1, "the first read")

    plugin.ok(*take("n1", {G: 1}))
    plugin.ok(*take("n1", {G: 1}))
    plugin.add("n2", {G: 1})
    exporter.wait(lambda s: exporter.get(s, "nodes") == 2, "n2")
    plugin.ok("remove-node", {"nodename": "n2"})  # its head goes: its event is still counted
    writer, doomed, rival = store_of(plugin), store_of(plugin, max_attempts=1), store_of(plugin)
    try:
        writer.appender.append(
            "n1", "raced", losing_to(rival, "rival")
        )  # lands after one lost race
        with pytest.raises(Contention):
            doomed.appender.append("n1", "doomed", losing_to(rival, "rival"))  # gives up
    finally:
        for store in (writer, doomed, rival):
            store.close()

    expected = {
        "set-node-resource-usage": 2, "add-node": 1, "remove-node": 1, "raced": 1, "rival": 2,
    }  # fmt: skip
    appends = exporter.name("appends_total")
    scraped = exporter.wait(
        lambda s: {dict(k)["verb"]: v for k, v in s.series(appends).items()} == expected,
        f"appends {expected}",
    )
    retries = scraped.series(exporter.name("cas_retries_total"))
    assert retries == {frozenset({("verb", "raced")}): 1}
    # ... as the ledger recorded them: the event that landed says it lost one race.
    (raced,) = [e for e in etcd.event_docs("n1") if e["verb"] == "raced"]
    assert raced["retries"] == 1
    failures = exporter.name("write_failures_total")
    scraped = exporter.wait(lambda s: bool(s.series(failures)), "a write failure")
    assert scraped.series(failures) == {frozenset({("verb", "doomed")}): 1}
    assert exporter.stop()[1] == ""


# -- drift ----------------------------------------------------------------------------------


def test_a_head_that_drifted_from_its_stream_is_counted_until_repaired(
    plugin: Plugin, etcd: Etcd, exporters: list[Exporter]
) -> None:
    plugin.add("n1", {G: 4})
    plugin.add("n2", {G: 4})
    exporter = start(exporters, plugin)
    exporter.wait(lambda s: exporter.get(s, "drifted_nodes") == 0, "a verify pass")

    head = etcd.head("n1")
    assert head is not None
    drifted = head.json()
    drifted["usage"] = {"prod_count_map": {G: 3}}  # what no event says
    etcd.put_many({etcd.head_key("n1"): json.dumps(drifted).encode()})
    scraped = exporter.wait(lambda s: exporter.get(s, "drifted_nodes") == 1, "the drift")
    assert exporter.get(scraped, "used_cards", nodename="n1", product=G) == 3  # the head, as core

    repaired = plugin.run("verify", None, "n1", "--repair")
    assert repaired.status == 0, repaired.stderr
    exporter.wait(lambda s: exporter.get(s, "drifted_nodes") == 0, "the repair")
    assert exporter.stop()[1] == ""


# -- etcd away and back ---------------------------------------------------------------------


@pytest.fixture
def own_etcd() -> Iterator[Cluster]:
    """An etcd of the test's own, to stop and start again (same port, same data)."""
    cluster = Cluster(1).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_series_are_dropped_while_etcd_is_away_and_return_with_it(
    own_etcd: Cluster, tmp_path: Path, exporters: list[Exporter]
) -> None:
    plugin = Plugin(own_etcd.endpoints, tmp_path, timeout=1)
    plugin.add("n1", {G: 2})
    exporter = start(exporters, plugin, "--stale-after", "1")
    capacity = {"metric": "capacity_cards", "nodename": "n1", "product": G}

    def has_nodes(s: Scrape) -> bool:
        return exporter.get(s, "etcd_up") == 1 and exporter.get(s, **capacity) == 2

    exporter.wait(has_nodes, "the node")
    (member,) = own_etcd.members
    member.kill()
    away = exporter.wait(lambda s: exporter.get(s, "etcd_up") == 0, "etcd_up 0")
    stale = exporter.wait(lambda s: exporter.get(s, **capacity) is None, "the series dropped")
    for metric in ("capacity_cards", "used_cards", "stream_events", "last_event_age_seconds",
                   "nodes", "drifted_nodes", "write_failures"):  # fmt: skip
        assert exporter.name(metric) not in stale.families, metric
    assert exporter.get(stale, "etcd_up") == 0
    assert exporter.name("last_refresh_timestamp_seconds") in away.families  # when, still

    member.start()
    member.wait_healthy()
    plugin.add("n2", {G: 1})
    back = exporter.wait(lambda s: has_nodes(s) and exporter.get(s, "nodes") == 2, "etcd back")
    assert exporter.get(back, "appends_total", verb="add-node") == 1  # counted across the gap
    out, err = exporter.stop()
    said = err.splitlines()  # once each, not at every refresh nor at every verify pass
    assert all(line.startswith("resource-gpu exporter: ") for line in said), err
    assert all("etcd unreachable" in line for line in said), err
    assert sorted(line.split(": ")[1] for line in said) in (
        ["cannot read etcd"],
        ["cannot read etcd", "verify pass abandoned"],
    ), err
    assert out.splitlines() == ["etcd can be read again", f"stopped serving {exporter.url}"]


def test_an_auth_change_of_another_user_never_reads_as_etcd_down(
    tmp_path: Path, exporters: list[Exporter]
) -> None:
    """The exporter keeps its etcd token for its life. etcd refuses a JWT had before any
    change of users or roles: the exporter authenticates once more and reads on, and
    ``etcd_up`` stays 1 (no false "etcd down" alert)."""
    member = start_auth_member(tmp_path, jwt=True)
    try:
        auth = {"username": "eru", "password": "eru-secret"}
        plugin = Plugin([member.client_url], tmp_path, auth=auth)
        plugin.add("n1", {G: 2})
        exporter = start(exporters, plugin)
        exporter.wait(lambda s: exporter.get(s, "nodes") == 1, "the node")
        add_user(member, "x")
        changed = time.time()

        def read_since(s: Scrape) -> bool:
            return (exporter.get(s, "last_refresh_timestamp_seconds") or 0) > changed + 0.5

        after = exporter.wait(read_since, "a refresh after the auth change", timeout=10)
        assert exporter.get(after, "etcd_up") == 1
        _, err = exporter.stop()
        assert err == ""  # never "cannot read etcd", not even once
    finally:
        member.kill()


def test_it_starts_with_etcd_away_and_says_so_once(
    tmp_path: Path, exporters: list[Exporter]
) -> None:
    nowhere = Plugin([f"http://127.0.0.1:{free_port()}"], tmp_path, timeout=1)
    exporter = start(exporters, nowhere)
    scraped = exporter.wait(lambda s: exporter.get(s, "etcd_up") == 0, "etcd_up 0")
    time.sleep(1)  # several refreshes and verify passes fail meanwhile
    assert exporter.name("nodes") not in scraped.families
    assert exporter.name("last_refresh_timestamp_seconds") not in scraped.families  # none yet
    out, err = exporter.stop()
    assert out == f"stopped serving {exporter.url}\n"
    said = sorted(line.split(": ")[1] for line in err.splitlines())
    assert said == ["cannot read etcd", "verify pass abandoned"], err


# -- stopping, and bad input ----------------------------------------------------------------


IDLE = 2000


def test_it_answers_past_its_open_file_limit_of_idle_connections(
    plugin: Plugin, exporters: list[Exporter]
) -> None:
    """2,000 connections opened and left idle, against the 1,024 open files a unit without
    LimitNOFILE gets: the exporter answered none of them and sat at 100% CPU, its scrapes timed
    out and its refresh failed ("Too many open files"). It closes the oldest idle connection
    once too many are open, so a scrape still answers within a second and etcd stays read."""
    plugin.add("n1", {"nvidia-3090": 2})
    exporter = start(exporters, plugin, open_files=1024)
    exporter.wait(lambda s: exporter.get(s, "etcd_up") == 1, "etcd up")
    host, port = exporter.url.split("/")[2].rsplit(":", 1)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < IDLE + 100:
        pytest.fail(f"this test opens {IDLE} sockets: the hard limit on open files is {hard}")
    limit_open_files(IDLE + 100)
    idle: list[socket.socket] = []
    try:
        refused = 0
        while len(idle) < IDLE and refused < 100:  # a server that stopped accepting: enough
            try:  # (a connection the backlog dropped is tried again)
                idle.append(socket.create_connection((host, int(port)), timeout=0.25))
            except OSError:
                refused += 1
        with urllib.request.urlopen(exporter.url, timeout=1) as reply:
            scraped = Scrape(reply.read().decode(), reply.headers["Content-Type"])
        assert exporter.get(scraped, "capacity_cards", nodename="n1", product="nvidia-3090") == 2
        time.sleep(1)  # a refresh or more, every 0.2 s
        assert exporter.get(exporter.scrape(), "etcd_up") == 1
        closed = 0
        for sock in idle:
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                closed += sock.recv(1) == b""
        assert len(idle) == IDLE, f"{len(idle)} of {IDLE} connections were accepted"
        assert closed >= IDLE - 1024, f"only {closed} of {len(idle)} idle connections closed"
    finally:
        for sock in idle:
            sock.close()
    assert exporter.stop()[1] == ""


def test_sigterm_closes_the_server_and_exits_0(plugin: Plugin, exporters: list[Exporter]) -> None:
    plugin.add("n1", {G: 1})
    exporter = start(exporters, plugin)
    exporter.wait(lambda s: exporter.get(s, "nodes") == 1, "the node")
    port = int(exporter.url.rsplit(":", 1)[1].split("/")[0])
    started = time.monotonic()
    assert exporter.stop() == (f"stopped serving {exporter.url}\n", "")
    assert time.monotonic() - started < 10
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass


def test_only_metrics_is_served(plugin: Plugin, exporters: list[Exporter]) -> None:
    exporter = start(exporters, plugin)
    elsewhere = exporter.url.removesuffix("/metrics") + "/nothing"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(elsewhere, timeout=10)
    assert refused.value.code == 404
    assert exporter.stop()[1] == ""


def exporter_run(plugin: Plugin, *args: str, env: dict[str, str] | None = None) -> Any:
    return plugin.run("exporter", None, *args, env=env, timeout=30)


@pytest.mark.parametrize(
    ("listen", "why"),
    [
        ("nonsense", "no port"),
        ("127.0.0.1:", "no port"),
        ("127.0.0.1:http", "the port 'http' is not a number"),
        ("127.0.0.1:70000", "the port 70000 is out of range"),
        ("::1:18464", "an IPv6 address goes in brackets"),
        ("no host:18464", "'no host' is not a host name or address"),
    ],
)
def test_a_bad_listen_address_is_refused_in_one_line(plugin: Plugin, listen: str, why: str) -> None:
    refused = exporter_run(plugin, "--listen", listen)
    line = failure_line(refused, "exporter")
    assert refused.status == 2  # a usage error, said before anything starts
    assert f"--listen {listen!r}: {why}" in line and "expected HOST:PORT" in line, line


def test_an_address_in_use_and_a_stale_limit_below_the_interval_are_refused(
    plugin: Plugin,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = failure_line(exporter_run(plugin, "--listen", f"127.0.0.1:{port}"), "exporter")
    assert (
        line == f"resource-gpu exporter: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    short = exporter_run(plugin, "--every", "10", "--stale-after", "5")
    assert "--stale-after 5 is shorter than --every 10" in failure_line(short, "exporter")
    assert short.status == 2


@pytest.mark.parametrize(
    ("program", "port"), [("resource-gpu", 18464), ("resource-storage", 18465)]
)
def test_each_program_has_its_own_default_port_on_loopback(
    plugin: Plugin, storage: Plugin, program: str, port: int
) -> None:
    """Both exporters run on one host without a --listen: shown by holding the port first."""
    runs = plugin if program == "resource-gpu" else storage
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # held by another process already: the same answer
            taken.bind(("127.0.0.1", port))
            taken.listen()
        line = failure_line(exporter_run(runs), "exporter", program=program)
    assert line == f"{program} exporter: cannot listen on 127.0.0.1:{port}: Address already in use"


def test_without_prometheus_client_it_says_how_to_install_it(
    plugin: Plugin, tmp_path: Path
) -> None:
    shadow = tmp_path / "shadow" / "prometheus_client"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    result = exporter_run(plugin, env={"PYTHONPATH": str(shadow.parent)})
    line = failure_line(result, "exporter")
    assert "prometheus-client is not installed: pip install 'resource-extend[exporter]'" in line


def test_help_reads_as_a_manual(plugin: Plugin) -> None:
    shown = plugin.run("exporter", None, "--help")
    assert shown.status == 0, shown.stderr
    assert "resource-gpu exporter --listen :18464 --every 30" in shown.stdout
    assert "[default: 127.0.0.1:18464]" in shown.stdout
    for said in ("/metrics", "--stale-after", "SIGTERM", "drifted_nodes", "cas_retries_total"):
        assert said in shown.stdout, said
    assert "{prog}" not in shown.stdout


# -- what joins core's metrics, and what Prometheus' own tool says ---------------------------------


def test_build_info_and_a_landing_page_name_the_program_and_its_release(
    plugin: Plugin, exporters: list[Exporter]
) -> None:
    from resource_extend.commands.program import installed_version

    exporter = start(exporters, plugin)
    scraped = exporter.scrape()
    assert scraped.series("resource_extend_build_info") == {
        frozenset({("program", "resource-gpu"), ("version", installed_version())}): 1
    }
    root = exporter.url.removesuffix("metrics")
    with urllib.request.urlopen(root, timeout=10) as reply:
        page = reply.read().decode()
        assert reply.headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<a href="/metrics">/metrics</a>' in page and installed_version() in page


def promtool() -> str:
    """Prometheus' checker: CI installs it (Debian's prometheus); elsewhere the checks that
    need it are skipped unless RESOURCE_EXTEND_REQUIRE_PROMTOOL=1 makes its absence fail."""
    import shutil

    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("RESOURCE_EXTEND_REQUIRE_PROMTOOL") == "1":
            pytest.fail("promtool is not installed (apt-get install prometheus)")
        pytest.skip("promtool is not installed")
    return found


def test_promtool_finds_the_alert_rules_sound() -> None:
    rules = Path(__file__).resolve().parents[1] / "docs" / "resource-extend-alerts.yml"
    checked = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("program", ["resource-gpu", "resource-storage"])
def test_promtool_finds_a_scrape_clean(
    program: str, etcd_endpoints: list[str], tmp_path: Path, exporters: list[Exporter]
) -> None:
    checker = promtool()
    plugin = Plugin(etcd_endpoints, tmp_path, program=program)
    if program == "resource-gpu":
        plugin.add("n1", {"nvidia-3090": 2})
    exporter = start(exporters, plugin)
    text = exporter.wait(lambda s: exporter.get(s, "etcd_up") == 1, "a read of etcd").text
    checked = subprocess.run(
        [checker, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0 and not checked.stdout + checked.stderr, checked.stderr
