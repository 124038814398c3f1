"""Core's verbs and the auditor commands on a kind the product has never heard of: apples
(``tests/apples/``), against real etcd, run through ``commands.main`` as an installed script
of that kind runs them: in this process, and as a script core runs. Nothing here or there
touches a product file: a kind is one folder whose value is handed to the shell, and the
ledger, the verbs' plumbing and the auditor commands are written once for any."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.store import Store
from tests.apples import APPLES, NODE, Apples, eat, plant
from tests.apples.plugin import PLUGIN
from tests.etcdkv import Etcd
from tests.plugin import Plugin, Result, in_process

EATERS = 8
"""Writers racing on the one node, each eating one apple."""


@dataclass
class Orchard:
    """A prefix of the test's own, its config, and the store an apples plugin would open."""

    config: Path
    settings: EtcdConfig
    exports: Path

    def store(self) -> Store[Apples]:
        return Store(self.settings, APPLES)

    def run(self, *args: str) -> Result:
        """``resource-apples ARGS``, in-process: status, stdout and stderr."""
        return in_process(PLUGIN, ["--config", str(self.config), *args])

    def ok(self, *args: str) -> Any:
        done = self.run(*args)
        assert (done.status, done.stderr) == (0, ""), done
        return json.loads(done.stdout) if "--json" in args else done.stdout

    def verb(self, verb: str, request: Any) -> Result:
        """Core's call of ``verb`` with ``request`` on stdin, in-process."""
        stdin = json.dumps(request).encode()
        return in_process(PLUGIN, ["--config", str(self.config), verb], stdin)

    def answer(self, verb: str, request: Any) -> Any:
        done = self.verb(verb, request)
        assert (done.status, done.stderr) == (0, ""), done
        return json.loads(done.stdout)


@pytest.fixture
def orchard(plugin: Plugin, tmp_path: Path) -> Orchard:
    """The suite's etcd, under the prefix ``plugin`` made for this test (nothing of it used
    but its endpoints and prefix)."""
    config = tmp_path / PLUGIN.config_file
    settings = {"machines": plugin.endpoints, "prefix": plugin.prefix}
    config.write_text(json.dumps({"etcd": settings, "resident": False}))
    exports = tmp_path / "exports"
    exports.mkdir()
    return Orchard(config, EtcdConfig(**settings), exports)  # type: ignore[arg-type]


def planted_and_raced(orchard: Orchard) -> None:
    """Ten apples planted, then ``EATERS`` writers, each with a store of its own, eat one
    each at once: every lost compare-and-swap decides again on the rival's state."""
    orchard.store().appender.append(NODE, "plant", plant(10))
    start = threading.Barrier(EATERS)

    def eater() -> None:
        store = orchard.store()
        start.wait()
        store.appender.append(NODE, "eat", eat(1))

    threads = [threading.Thread(target=eater) for _ in range(EATERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_appends_race_and_nodes_and_history_show_the_fold(orchard: Orchard) -> None:
    planted_and_raced(orchard)
    assert orchard.ok("nodes", "--json") == [
        {"nodename": NODE, "state": "live", "apples": 10, "eaten": EATERS, "events": 9, "seq": 9}
    ]
    history = orchard.ok("history", NODE, "--json")
    assert [event["seq"] for event in history] == list(range(1, 10))
    assert [event["kind"] for event in history] == ["node_added"] + ["usage_changed"] * EATERS
    assert history[-1]["change"]["delta"] == 1
    listing = orchard.ok("nodes").splitlines()
    assert listing[0].split() == ["NODE", "STATE", "APPLES", "EATEN", "EVENTS", "SEQ"]
    assert listing[1].split() == [NODE, "live", "10", str(EATERS), "9", "9"]
    table = [line.split() for line in orchard.ok("history", NODE).splitlines()]
    assert [row[4:] for row in table[-2:]] == [
        ["10", str(EATERS - 1), "usage", "+1"],  # after each, as the kind says a state
        ["10", str(EATERS), "usage", "+1"],
    ]


def test_history_takes_the_kind_s_own_change_kinds_only(orchard: Orchard) -> None:
    planted_and_raced(orchard)
    eaten = orchard.ok("history", NODE, "--kind", "usage_changed", "--json")
    assert len(eaten) == EATERS
    refused = orchard.run("history", NODE, "--kind", "capacity_set")  # GPU's, not apples'
    assert refused.status == 2 and refused.stdout == ""
    assert "'capacity_set' is not one of" in refused.stderr, refused.stderr


def test_compaction_then_show_and_verify_hold_the_same_state(orchard: Orchard) -> None:
    planted_and_raced(orchard)
    compacted = orchard.run(
        "compact", NODE, "--keep", "2", "--min-age", "0", "--export-dir", str(orchard.exports)
    )
    assert compacted.status == 0, compacted
    assert len(list(orchard.exports.iterdir())) == 1
    assert orchard.ok("show", NODE, "--json") == {"apples": 10, "eaten": EATERS, "seq": 9}
    assert orchard.ok("show", NODE, "--at", "8", "--json") == {"apples": 10, "eaten": 7, "seq": 8}
    assert orchard.ok("nodes", "--json")[0]["events"] == 3  # the checkpoint and 2 kept
    checked = orchard.run("verify", NODE)
    assert checked.status == 0, checked


def test_verify_names_a_head_that_drifted_in_the_kind_s_own_words(orchard: Orchard) -> None:
    planted_and_raced(orchard)
    store = orchard.store()
    raw = Etcd(list(orchard.settings.machines), orchard.settings.prefix, APPLES.name)
    try:
        raw.put_many({store.keys.head(NODE).decode(): APPLES.write_head(Apples(capacity=10), 9)})
    finally:
        raw.close()
    found = orchard.run("verify", NODE)
    assert found.status == 1
    assert f"usage differs: head 0 apples, stream {EATERS} apples" in found.stdout, found
    assert found.stderr.startswith("resource-apples verify: 1 of 1 node disagrees"), found.stderr


def test_core_verbs_of_the_toy_kind_write_events_the_auditor_commands_read(
    orchard: Orchard,
) -> None:
    assert orchard.answer("add-node", {"nodename": "tree", "resource": 10}) == {
        "capacity": 10,
        "usage": 0,
    }
    eat = {"nodename": "tree", "resource_request": 3, "delta": True, "incr": True}
    assert orchard.answer("set-node-resource-usage", eat) == {"before": 0, "after": 3}
    held = {"nodename": "tree", "workloads_resource": [1, 2]}
    assert orchard.answer("get-node-resource-info", held)["diffs"] == []
    fixed = orchard.answer("fix-node-resource", {"nodename": "tree", "workloads_resource": [2]})
    assert fixed == {"capacity": 10, "usage": 2, "diffs": ["3 eaten, workloads hold 2"]}
    kinds = [event["kind"] for event in orchard.ok("history", "tree", "--json")]
    assert kinds == ["node_added", "usage_changed", "usage_rebuilt"]
    assert orchard.ok("show", "tree", "--json") == {"apples": 10, "eaten": 2, "seq": 3}
    too_many = orchard.verb("set-node-resource-usage", {**eat, "resource_request": 9})
    assert too_many.status == 1 and too_many.stdout == ""
    assert too_many.stderr == (
        "resource-apples set-node-resource-usage: node tree: 9 apples do not fit: 8 left\n"
    )
    lacking = orchard.verb("calculate-deploy", {"nodename": "tree"})  # apples has none
    assert lacking.status == 2 and "No such command 'calculate-deploy'" in lacking.stderr


def test_the_toy_kind_runs_as_a_script_core_runs(orchard: Orchard, tmp_path: Path) -> None:
    """An installed script of the kind is two lines (``scripts/resource-gpu``'s): core runs
    it with a verb and one JSON object on stdin."""
    root = Path(__file__).parents[2]
    script = tmp_path / "resource-apples"
    script.write_text(
        f"#!{sys.executable}\n"
        f"import sys; sys.path.insert(0, {str(root)!r})\n"
        "from resource_extend.commands.main import run\n"
        "from tests.apples.plugin import PLUGIN\n"
        "run(PLUGIN)\n"
    )
    script.chmod(0o755)

    def core(verb: str, request: Any) -> subprocess.CompletedProcess[str]:
        argv = [str(script), "--config", str(orchard.config), verb]
        return subprocess.run(
            argv, input=json.dumps(request), capture_output=True, text=True, timeout=60
        )

    added = core("add-node", {"nodename": "tree", "resource": 4})
    assert (added.returncode, added.stderr) == (0, "")
    assert json.loads(added.stdout) == {"capacity": 4, "usage": 0}
    read = core("get-node-resource-info", {"nodename": "tree", "workloads_resource": [1]})
    assert (read.returncode, read.stderr) == (0, "")
    assert json.loads(read.stdout)["diffs"] == ["0 eaten, workloads hold 1"]
    again = core("add-node", {"nodename": "tree", "resource": 4})
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.startswith("resource-apples add-node: node tree: "), again.stderr
