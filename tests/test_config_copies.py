"""Parsed copies of the config (commands/resident/copies.py): with ``resident: false`` every call
is a new process, and the first one keeps what gpu.yaml parsed to in the private runtime
directory, so later ones need not load PyYAML. A copy is used only for the very text and
directory it was parsed from."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path

import pytest

from tests.plugin import TRANSPORT, Plugin, counts
from tests.test_startup import modules_loaded_by

pytestmark = pytest.mark.resident

G = "nvidia-3090"


def copy_of(plugin: Plugin) -> Path:
    runtime = Path(os.environ["XDG_RUNTIME_DIR"], f"resource-gpu-{os.getuid()}")
    return runtime / f"{zlib.crc32(str(plugin.config).encode()):08x}.config"


def as_yaml(plugin: Plugin, resident: bool = False, password: str = "") -> None:
    """The plugin's config as an operator writes it: YAML, not the harness's JSON."""
    # allow_plain_http: etcd in containers is not on this host, and over http:// a password
    # elsewhere is refused (the config would not parse, and no copy be written or dropped)
    secret = f"username: root, password: {password}, allow_plain_http: true"
    auth = f"  auth: {{{secret}}}\n" if password else ""
    plugin.config.write_text(
        "etcd:\n"
        f"  machines: [{', '.join(plugin.endpoints)}]\n"
        f"  prefix: {plugin.prefix}\n"
        f"  transport: {TRANSPORT}\n"
        f"{auth}"
        f"resident: {'true' if resident else 'false'}\n"
    )


@pytest.fixture
def n1(plugin: Plugin) -> Plugin:
    as_yaml(plugin)
    plugin.add("n1", {G: 4})
    return plugin


def test_later_calls_take_the_parsed_copy_and_leave_pyyaml_alone(n1: Plugin) -> None:
    copy = copy_of(n1)
    assert copy.stat().st_mode & 0o777 == 0o600
    digest = hashlib.sha256(n1.config.read_bytes()).hexdigest()
    assert json.loads(copy.read_bytes())["digest"] == digest  # the text's, not the text
    request = json.dumps({"nodename": "n1"}).encode()
    assert "yaml" not in modules_loaded_by("get-node-resource-info", request, str(n1.config))
    assert counts(n1.info("n1")["capacity"]) == {G: 4}


def test_an_edited_config_is_parsed_again(n1: Plugin) -> None:
    text = n1.config.read_text()
    before = n1.config.stat()
    n1.config.write_text(text.replace("prefix: /test-", "prefix: /TEST-"))  # same size
    os.utime(n1.config, ns=(before.st_atime_ns, before.st_mtime_ns))  # and time
    assert n1.run("get-node-resource-info", {"nodename": "n1"}).answer is None  # other prefix
    assert json.loads(copy_of(n1).read_bytes())["config"]["etcd"]["prefix"].startswith("/TEST-")


def test_a_copy_that_does_not_match_its_file_is_never_used(n1: Plugin) -> None:
    """A copy parsed from other text, or from the same text in another directory (relative
    paths would mean other files), or that is not a copy at all, is parsed afresh."""
    copy = copy_of(n1)
    found = json.loads(copy.read_bytes())
    elsewhere = {**json.loads(copy.read_bytes()), "base": "/somewhere/else"}
    elsewhere["config"]["etcd"]["prefix"] = "/another-prefix"
    other_text = {**elsewhere, "base": found["base"], "digest": "0" * 64}
    for planted in (json.dumps(elsewhere), json.dumps(other_text), "not json", ""):
        copy.write_text(planted)
        assert counts(n1.info("n1")["capacity"]) == {G: 4}, planted
    assert json.loads(copy.read_bytes()) == found  # and a right one is kept again


def test_with_the_helper_on_no_copy_is_kept(plugin: Plugin) -> None:
    as_yaml(plugin, resident=True)
    plugin.add("n1", {G: 4})
    assert not copy_of(plugin).exists()


def test_a_config_with_a_password_is_never_copied(n1: Plugin) -> None:
    """A copy would hold etcd.auth's password in plain text on disk (and did: the file's text
    and the parsed config, even for a call that then failed). A config with one is parsed on
    every call, and the copy kept from before it had one is removed."""
    assert copy_of(n1).exists()
    as_yaml(n1, password=SECRET)
    n1.run("get-node-resource-info", {"nodename": "n1"})  # etcd here has no auth: it may fail
    assert not copy_of(n1).exists()
    for found in copy_of(n1).parent.iterdir():  # the helper's socket too, in that mode
        assert not found.is_file() or SECRET.encode() not in found.read_bytes(), found


SECRET = "s3cret-in-the-file"
