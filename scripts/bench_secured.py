"""scripts/bench's rows for a secured etcd, each a read through the same path as the main
table's, against etcdctl doing the same: with etcd auth (a user and password: etcd checks the
password with bcrypt), and over TLS verified against the system's CAs (the test CA added to a
copy of them, named by ``SSL_CERT_FILE``). Each etcd is a throwaway of its own, started as the
tests start theirs (``tests.secured_etcd``)."""

from __future__ import annotations

import json
import os
import ssl
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from scripts.benching import Command
from tests.etcd_server import Member, etcdctl_binary
from tests.secured_etcd import start_auth_member, start_https_member

if TYPE_CHECKING:
    from scripts.benching import Bench

PREFIX = "/test-bench"
"""Under ``/test-``, which the auth member's user may read and write."""
NODE = {"nodename": "short", "resource": {"prod_count_map": {"nvidia-3090": 8}}}
READ = {"nodename": "short"}
USER, PASSWORD = "eru", "eru-secret"


def secured_rows(bench: Bench) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "auth").mkdir()
        member = start_auth_member(directory / "auth")
        try:
            _auth_row(bench, member, directory)
        finally:
            member.kill()
        (directory / "tls").mkdir()
        member, files = start_https_member(directory / "tls")
        try:
            system = Path(ssl.get_default_verify_paths().openssl_cafile).read_bytes()
            bundle = directory / "bundle.pem"
            bundle.write_bytes(system + files.ca.cert_pem.bytes())
            _tls_row(bench, member, bundle, directory)
        finally:
            member.kill()


def _auth_row(bench: Bench, member: Member, directory: Path) -> None:
    auth: dict[str, object] = {"auth": {"username": USER, "password": PASSWORD}}
    ours = _read(bench, _config(bench, directory / "auth.yaml", member, auth))
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}", f"--user={USER}:{PASSWORD}"]
    bench.compare("read with etcd auth (user and password)", ours,
                  Command([*ctl, "get", f"{PREFIX}/x"]), "etcdctl --user get",
                  bench.call_goals[0])  # fmt: skip


def _tls_row(bench: Bench, member: Member, bundle: Path, directory: Path) -> None:
    config = _config(bench, directory / "tls.yaml", member, {})
    before = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(bundle)  # the calls', and so their helper's
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}", f"--cacert={bundle}"]
    try:
        bench.compare("read over TLS, verified against the system's CAs", _read(bench, config),
                      Command([*ctl, "get", f"{PREFIX}/x"]), "etcdctl --cacert get",
                      bench.call_goals[0])  # fmt: skip
    finally:
        if before is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = before


def _config(bench: Bench, path: Path, member: Member, etcd: dict[str, object]) -> Path:
    settings = {"machines": [member.client_url], "prefix": PREFIX, "transport": bench.transport}
    config = {"etcd": {**settings, **etcd}, "resident": bench.resident}
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def _read(bench: Bench, config: Path) -> Command:
    """The read of a node added at this member, its helper started."""
    bench.answer("add-node", NODE, config)
    for _ in range(5):  # the first starts the helper
        bench.answer("get-node-resource-info", READ, config)
    return bench.call("get-node-resource-info", READ, config)
