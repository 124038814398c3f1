"""Calls the helper serves answer exactly as calls run in-process; it never holds core's pipes;
it is easy to turn off; it follows config changes; the caller, not the helper, is on record."""

from __future__ import annotations

import json
import os
import pwd
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import trustme

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.resident import client as resident
from tests.etcdkv import Etcd
from tests.plugin import MODE, Plugin, R, counts
from tests.resident.conftest import (
    TAKE,
    G,
    helper_pid,
    own_dir,
    resident_plugin,
    started,
    wait_for,
)
from tests.secured_etcd import start_https_member


def test_a_call_starts_a_helper_without_holding_cores_pipes(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    # The first call runs in-process and starts the helper; had the helper inherited stdout,
    # this call would not return (the harness reads the pipes to their end).
    plugin.add("n1", {G: 4})
    wait_for(lambda: helper_pid(plugin), "the helper to answer")
    assert own_dir(runtime).stat().st_mode & 0o777 == 0o700


def test_answers_through_the_helper_are_the_in_process_answers(
    plugin: Plugin, runtime: Path
) -> None:
    resident_plugin(plugin)
    started(plugin)
    calls: list[tuple[str, Any]] = [
        ("get-node-resource-info", {"nodename": "n1"}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n1"], "resource_request": R({G: 1})}),
        ("calculate-deploy", {"nodename": "n1", "deploy_count": 9, "resource_request": R({G: 1})}),
        ("get-node-resource-info", {"nodename": "nope"}),
        ("set-node-resource-usage", {"nodename": "n1", "resource": R({G: 99}), "delta": True}),
        ("add-node", "{not json"),
        ("name", None),
        ("verbs", None),
    ]
    served_by = helper_pid(plugin)
    for verb, request in calls:
        raw = request.encode() if isinstance(request, str) else None
        served = plugin.run(verb, request, raw=raw)
        local = plugin.run(verb, request, raw=raw, env={GPU.env("RESIDENT"): "0"})
        assert (served.status, served.stdout, served.stderr) == (
            local.status,
            local.stdout,
            local.stderr,
        ), verb
    assert helper_pid(plugin) == served_by, "the helper did not serve them all"


def test_writes_through_the_helper_are_applied_once(
    plugin: Plugin, runtime: Path, etcd: Etcd
) -> None:
    resident_plugin(plugin)
    plugin.add("n1", {G: 64})
    wait_for(lambda: helper_pid(plugin), "the helper to answer")
    answers = [plugin.ok("set-node-resource-usage", TAKE) for _ in range(5)]
    assert [counts(a["after"]) for a in answers] == [{G: n} for n in range(1, 6)]
    assert len(etcd.events("n1")) == 1 + 5


def test_it_is_easy_to_turn_off(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin, on=False)
    plugin.add("n1", {G: 4})
    plugin.info("n1")
    resident_plugin(plugin, on=True)
    off = {GPU.env("RESIDENT"): "0"}
    assert plugin.run("get-node-resource-info", {"nodename": "n1"}, env=off).status == 0
    time.sleep(0.5)
    assert helper_pid(plugin) is None, "a helper started although it was turned off"


def test_a_call_that_failed_starts_no_helper(plugin: Plugin, runtime: Path) -> None:
    """A call against a broken config (here an etcd that is not there) or with a refused
    request leaves no helper behind to idle out; the first call that works starts one."""
    resident_plugin(plugin)
    machines = json.loads(plugin.config.read_text())["etcd"]["machines"]
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{unused.getsockname()[1]}"
    resident_plugin(plugin, machines=[nobody], timeout=1)
    assert plugin.run("get-node-resource-info", {"nodename": "n1"}).status == 1
    resident_plugin(plugin, machines=machines)
    assert plugin.run("add-node", None, raw=b"{not json").status == 1
    time.sleep(1.0)  # a helper started would answer well within this
    assert helper_pid(plugin) is None, "a failed call started a helper"
    started(plugin)


def test_turning_it_off_in_the_config_stops_a_running_helper(plugin: Plugin, runtime: Path) -> None:
    resident_plugin(plugin)
    plugin.add("n1", {G: 4})
    wait_for(lambda: helper_pid(plugin), "the helper to answer")
    resident_plugin(plugin, on=False)  # the helper re-reads a changed config
    assert counts(plugin.info("n1")["capacity"]) == {G: 4}
    wait_for(lambda: not helper_pid(plugin), "the helper to stop")
    assert counts(plugin.info("n1")["capacity"]) == {G: 4}  # calls go on in-process


def test_a_config_change_that_keeps_size_and_time_is_seen(plugin: Plugin, runtime: Path) -> None:
    """The helper re-reads its config by content, not by size and modification time."""
    resident_plugin(plugin)
    started(plugin)
    before = plugin.config.stat()
    config = json.loads(plugin.config.read_text())
    config["etcd"]["prefix"] = config["etcd"]["prefix"][:-1] + (
        "x" if config["etcd"]["prefix"][-1] != "x" else "y"
    )  # another prefix, same length: a node that does not exist there
    plugin.config.write_text(json.dumps(config))
    os.utime(plugin.config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert plugin.config.stat().st_size == before.st_size
    assert plugin.run("get-node-resource-info", {"nodename": "n1"}).answer is None


def test_events_name_the_caller_not_whoever_started_the_helper(plugin: Plugin, etcd: Etcd) -> None:
    """``by`` is the account of the calling process (its uid, as the system names it), in every
    mode: neither a name from the environment nor the helper's starter."""
    plugin.run("add-node", {"nodename": "n1", "resource": R({G: 4})}, env=_named("mallory"))
    if MODE == "resident":
        wait_for(lambda: helper_pid(plugin), "the helper to answer")
    result = plugin.run("set-node-resource-usage", TAKE, env=_named("alice"))
    assert result.status == 0, result.stderr
    account = f"{pwd.getpwuid(os.getuid()).pw_name}@{socket.gethostname()}"
    assert [event["by"] for event in etcd.event_docs("n1")] == [account, account]


def _named(user: str) -> dict[str, str]:
    return {"USER": user, "LOGNAME": user, "LNAME": user, "USERNAME": user}


def info_request(plugin: Plugin) -> bytes:
    """A call of ``get-node-resource-info`` as this process would send it now (its
    environment as it reads now)."""
    request = json.dumps({"nodename": "n1"}).encode()
    code = resident.installation()
    return resident.call_request("get-node-resource-info", str(plugin.config), code, request)


def taken(plugin: Plugin, request: bytes) -> bytes | None:
    """The helper's first answer to ``request``."""
    link = resident.Link.connect(plugin.program, resident.socket_name(str(plugin.config)))
    assert link is not None
    try:
        link.sock.settimeout(10)
        link.sock.sendall(request)
        return link.reader.line()
    finally:
        link.close()


def test_a_caller_whose_home_or_trust_differs_is_answered_as_in_process(
    plugin: Plugin, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper runs with its starter's environment: where exports go by default (``HOME``)
    and which CAs a TLS etcd is checked against (``SSL_CERT_FILE``, ``SSL_CERT_DIR``). A
    caller whose own say otherwise is not served by it (a CA trusted only by the starter's
    environment verified another caller's etcd) but answered in its own process, as it would
    be without a helper; a caller that agrees with the starter is served."""
    resident_plugin(plugin)
    started(plugin)
    monkeypatch.setenv("HOME", str(plugin.workdir / "home"))  # as the test's calls run
    ours = info_request(plugin)
    answer = taken(plugin, ours)
    assert answer is not None and answer.startswith(b"A "), answer
    elsewhere = plugin.workdir / "elsewhere"
    elsewhere.mkdir()
    for name in resident.CALLERS_ENVIRONMENT:
        with monkeypatch.context() as changed:
            changed.setenv(name, str(elsewhere))
            theirs = info_request(plugin)
        assert theirs != ours
        assert taken(plugin, theirs) == b"F", name
        # and through the binary, such a caller is answered, in its own process
        done = plugin.run("get-node-resource-info", {"nodename": "n1"}, env={name: str(elsewhere)})
        assert done.status == 0, done.stderr
        assert counts(json.loads(done.stdout)["capacity"]) == {"nvidia-3090": 8}


def test_a_caller_of_another_installation_is_answered_as_in_process(
    plugin: Plugin, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket's name is short, so two installations may share one: the helper compares the
    caller's installation with its own in full, and serves none but its own (another is
    answered in its own process: a name shared costs speed, never another's code)."""
    resident_plugin(plugin)
    started(plugin)
    monkeypatch.setenv("HOME", str(plugin.workdir / "home"))  # as the test's calls run
    request = json.dumps({"nodename": "n1"}).encode()
    config, ours = str(plugin.config), resident.installation()
    for code, answer in ((ours, b"A "), (ours + "|another", b"F"), (ours[:-1], b"F")):
        sent = resident.call_request("get-node-resource-info", config, code, request)
        assert (taken(plugin, sent) or b"").startswith(answer), code[-40:]


def test_a_caller_whose_ca_path_shares_the_starter_s_short_name_is_not_served(
    runtime: Path, tmp_path: Path
) -> None:
    """Round six: a helper compared its caller's environment by a short name of it, and two CA
    paths whose digits swap 31 bytes apart (``dc1/…/ca2.pem``, ``dc2/…/ca1.pem``) share one:
    a caller whose ``SSL_CERT_FILE`` names another CA was served with its starter's, and its
    call answered. Compared byte for byte, such a caller is answered in its own process, where
    the etcd's certificate does not verify; a caller that agrees with the starter is served."""
    member, files = start_https_member(tmp_path)
    plugin = resident_plugin(Plugin([member.client_url], tmp_path, timeout=2))
    try:
        filler = "x" * 26
        trusted = tmp_path / "dc1" / filler / "ca2.pem"
        another = tmp_path / "dc2" / filler / "ca1.pem"
        for path, pem in ((trusted, Path(files.ca_file).read_bytes()),
                          (another, trustme.CA().cert_pem.bytes())):  # fmt: skip
            path.parent.mkdir(parents=True)
            path.write_bytes(pem)
        assert resident.short_name(bytes(trusted)) == resident.short_name(bytes(another))
        starter = {"SSL_CERT_FILE": str(trusted)}
        added = plugin.run("add-node", {"nodename": "n1", "resource": R({G: 2})}, env=starter)
        assert added.status == 0, added.stderr  # and it starts the helper, trusting that CA
        wait_for(lambda: helper_pid(plugin), "the helper to answer")
        theirs = plugin.run("get-node-resource-info", {"nodename": "n1"},
                            env={"SSL_CERT_FILE": str(another)})  # fmt: skip
        assert theirs.status == 1 and theirs.stdout == "", theirs.stdout
        assert "certificate" in theirs.stderr.lower(), theirs.stderr
        with pytest.MonkeyPatch.context() as caller:
            caller.setenv("HOME", str(plugin.workdir / "home"))  # as the plugin's calls run
            caller.setenv("SSL_CERT_FILE", str(trusted))
            assert (taken(plugin, info_request(plugin)) or b"").startswith(b"A "), "not served"
            caller.setenv("SSL_CERT_FILE", str(another))
            assert taken(plugin, info_request(plugin)) == b"F"
    finally:
        plugin.stop_helper()
        member.kill()
