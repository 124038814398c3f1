"""A query reads etcd through the store's reading parts alone (``ledger.store.Reads``), as
etcd's client gives reads a KV and writes a transaction: nothing that writes is built for it.
A call that reads and then writes does both on one connection, so within one time budget; and
a config's endpoints are parsed once."""

from __future__ import annotations

import io
from typing import Any, NoReturn

import pytest

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.protocol import CallIO, Session
from resource_extend.ledger import store
from resource_extend.ledger.etcd.connection import Connection
from resource_extend.ledger.host import config as config_files
from tests.ledger.transports import Calls
from tests.plugin import Plugin, R

pytestmark = pytest.mark.etcd

G = "nvidia-3090"


def never(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError("a query built what writes")


QUERIES: list[tuple[str, Any]] = [
    ("get-node-resource-info", {"nodename": "n1"}),
    ("get-nodes-resource-info", {"nodenames": ["n1"]}),
    ("get-nodes-deploy-capacity", {"nodenames": ["n1"], "workload_resource": R({G: 1})}),
    (
        "calculate-deploy",
        {"nodename": "n1", "deploy_count": 1, "workload_resource_request": R({G: 1})},
    ),
    ("get-metrics", {"podname": "p", "nodename": "n1"}),
]


@pytest.mark.parametrize(("verb", "request_"), QUERIES, ids=[verb for verb, _ in QUERIES])
def test_a_query_builds_nothing_that_writes(
    plugin: Plugin, monkeypatch: pytest.MonkeyPatch, verb: str, request_: Any
) -> None:
    plugin.add("n1", {G: 2})
    for part in ("Appender", "Outcomes", "Checkpoints", "who"):
        monkeypatch.setattr(store, part, never)
    done = plugin.call(verb, request_)
    assert (done.status, done.stderr) == (0, ""), done.stderr
    take = {"nodename": "n1", "resource": R({G: 1}), "delta": True, "incr": True}
    wrote = plugin.call("set-node-resource-usage", take)  # a write does build it: the check bites
    assert wrote.status != 0 and "a query built what writes" in wrote.stderr, wrote.stderr


def test_a_call_that_reads_then_writes_holds_one_connection(plugin: Plugin) -> None:
    streams = CallIO(io.BytesIO(b"{}"), io.BytesIO(), io.BytesIO())
    session: Session[Any] = Session(GPU, str(plugin.config), streams)
    try:
        assert session.store.etcd is session.reads.etcd
    finally:
        session.close()
    later: Session[Any] = Session(GPU, str(plugin.config), streams)
    try:
        reads = later.reads
        assert not isinstance(reads, store.Store)
        assert later.store.etcd is reads.etcd  # the write goes on the reads' connection
    finally:
        later.close()


def test_a_configs_endpoints_are_parsed_once(
    plugin: Plugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_files._parsed.cache_clear()
    parsed = Calls(monkeypatch, config_files, "parse_endpoint").made
    settings = config_files.load(str(plugin.config)).etcd  # checked as it loads
    Connection(settings).close()  # its transport reads them too
    assert len(parsed) == len(settings.machines)
