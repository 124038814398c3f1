"""scripts/bench's rows for a secured etcd, each a read through the same path as the main
table's, against etcdctl doing the same: with etcd auth (a user and password: etcd checks the
password with bcrypt), and over TLS verified against the system's CAs (the test CA added to a
copy of them, named by ``SSL_CERT_FILE``). Each etcd is a throwaway of its own."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tests.etcd_server import Member, etcdctl_binary, free_port

if TYPE_CHECKING:
    from scripts.bench import Bench

NODE = {"nodename": "short", "resource": {"prod_count_map": {"nvidia-3090": 8}}}
READ = {"nodename": "short"}
USER, PASSWORD = "eru", "eru-secret"


def secured_rows(bench: Bench) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        with _member(directory / "auth", []) as member:
            _auth_row(bench, member, directory)
        with _tls_member(directory / "tls") as (member, bundle):
            _tls_row(bench, member, bundle, directory)


def _auth_row(bench: Bench, member: Member, directory: Path) -> None:
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}"]
    for args in (
        ["user", "add", "root", "--new-user-password=root-secret"],
        ["user", "add", USER, f"--new-user-password={PASSWORD}"],
        ["role", "add", "gpu"],
        ["role", "grant-permission", "gpu", "--prefix=true", "readwrite", "/bench"],
        ["user", "grant-role", USER, "gpu"],
        ["auth", "enable"],
    ):
        subprocess.run([*ctl, *args], check=True, capture_output=True)
    config = _config(bench, directory / "auth.yaml", member, {"auth": {"username": USER,
                     "password": PASSWORD}})  # fmt: skip
    ours = _read(bench, config)
    theirs = _median(bench, [*ctl, f"--user={USER}:{PASSWORD}", "get", "/bench/x"])
    bench.row("read with etcd auth (user and password)", ours, theirs,
              "etcdctl --user get", bench.call_goals[0])  # fmt: skip


def _tls_row(bench: Bench, member: Member, bundle: Path, directory: Path) -> None:
    config = _config(bench, directory / "tls.yaml", member, {})
    before = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = str(bundle)  # the calls', and so their helper's
    try:
        ours = _read(bench, config)
    finally:
        if before is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = before
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}", f"--cacert={bundle}"]
    theirs = _median(bench, [*ctl, "get", "/bench/x"])
    bench.row("read over TLS, verified against the system's CAs", ours, theirs,
              "etcdctl --cacert get", bench.call_goals[0])  # fmt: skip


def _median(bench: Bench, argv: list[str]) -> float:
    from scripts.bench import median_of

    return median_of(bench.repeat, argv)[0]


def _config(bench: Bench, path: Path, member: Member, etcd: dict[str, object]) -> Path:
    settings = {"machines": [member.client_url], "prefix": "/bench", "transport": bench.transport}
    config = {"etcd": {**settings, **etcd}, "resident": bench.resident}
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def _read(bench: Bench, config: Path) -> float:
    bench.answer("add-node", NODE, config)
    for _ in range(5):  # the first starts the helper
        bench.answer("get-node-resource-info", READ, config)
    return bench.plugin("get-node-resource-info", READ, config=config)[0]


@contextmanager
def _member(
    directory: Path, extra_args: list[str], health_context: ssl.SSLContext | None = None
) -> Iterator[Member]:
    """One etcd member in ``directory``: over TLS when ``health_context`` verifies it."""
    directory.mkdir()
    member = Member("s", free_port(), free_port(), directory / "s.data", extra_args=extra_args,
                    scheme="https" if health_context else "http",
                    health_context=health_context)  # fmt: skip
    member.start()
    try:
        member.wait_healthy()
        yield member
    finally:
        member.kill()


@contextmanager
def _tls_member(directory: Path) -> Iterator[tuple[Member, Path]]:
    """An etcd serving TLS with a certificate of a throwaway CA, and a copy of the system's
    CAs with that CA added."""
    import trustme

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    files = directory.parent
    server.cert_chain_pems[0].write_to_path(str(files / "server.pem"))
    server.private_key_pem.write_to_path(str(files / "server-key.pem"))
    system = Path(ssl.get_default_verify_paths().openssl_cafile).read_bytes()
    bundle = files / "bundle.pem"
    bundle.write_bytes(system + ca.cert_pem.bytes())
    args = ["--cert-file", str(files / "server.pem"), "--key-file", str(files / "server-key.pem")]
    verified = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    with _member(directory, args, verified) as member:
        yield member, bundle
