"""etcd with TLS client certificates, and with user/password auth; certificates made here."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.etcd_server import Member, etcdctl_binary, free_port
from tests.plugin import Plugin, R, counts

CARDS = {"nvidia-3090": 2}


class TLSFiles:
    def __init__(self, directory: Path) -> None:
        self.ca = trustme.CA()
        self.directory = directory
        self.ca_file = self._write("ca.pem", self.ca.cert_pem.bytes())
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.server_cert = self._write("server.pem", server.cert_chain_pems[0].bytes())
        self.server_key = self._write("server-key.pem", server.private_key_pem.bytes())
        client = self.ca.issue_cert("resource-gpu")
        self.client_cert = self._write("client.pem", client.cert_chain_pems[0].bytes())
        self.client_key = self._write("client-key.pem", client.private_key_pem.bytes())

    def _write(self, name: str, data: bytes) -> str:
        path = self.directory / name
        path.write_bytes(data)
        return str(path)

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        context.load_cert_chain(self.client_cert, self.client_key)
        return context


def start_member(
    directory: Path,
    scheme: str = "http",
    health_context: ssl.SSLContext | None = None,
    extra_args: list[str] | None = None,
) -> Member:
    member = Member(
        "s", free_port(), free_port(), directory / "s.data", extra_args=extra_args or [],
        scheme=scheme, health_context=health_context,
    )  # fmt: skip
    member.start()
    member.wait_healthy()
    return member


@pytest.fixture
def tls_etcd(tmp_path: Path) -> Iterator[tuple[Member, TLSFiles]]:
    files = TLSFiles(tmp_path)
    member = start_member(
        tmp_path,
        scheme="https",
        health_context=files.client_context(),
        extra_args=[
            "--cert-file", files.server_cert, "--key-file", files.server_key,
            "--trusted-ca-file", files.ca_file, "--client-cert-auth",
        ],
    )  # fmt: skip
    yield member, files
    member.kill()


def test_tls_with_client_certificates(tls_etcd: tuple[Member, TLSFiles], tmp_path: Path) -> None:
    member, files = tls_etcd
    plugin = Plugin(
        [member.client_url], tmp_path, ca=files.ca_file, cert=files.client_cert,
        key=files.client_key,
    )  # fmt: skip
    plugin.add("n1", CARDS)
    assert counts(plugin.info("n1")["capacity"]) == CARDS


def test_tls_server_refuses_a_plugin_without_certificates(
    tls_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    member, _ = tls_etcd
    plugin = Plugin([member.client_url], tmp_path, timeout=2)
    line = plugin.fails("get-node-resource-info", {"nodename": "n1"})
    assert "etcd" in line


def test_tls_with_a_certificate_from_another_ca_is_refused(
    tls_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    member, _ = tls_etcd
    (tmp_path / "other").mkdir()
    stranger = TLSFiles(tmp_path / "other")
    plugin = Plugin(
        [member.client_url], tmp_path, timeout=2, ca=stranger.ca_file,
        cert=stranger.client_cert, key=stranger.client_key,
    )  # fmt: skip
    line = plugin.fails("add-node", {"nodename": "n1", "resource": R(CARDS)})
    assert "etcd" in line


@pytest.fixture
def auth_etcd(tmp_path: Path) -> Iterator[Member]:
    member = start_member(tmp_path)
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}"]
    for args in (
        ["user", "add", "root", "--new-user-password=root-secret"],
        ["user", "add", "eru", "--new-user-password=eru-secret"],
        ["role", "add", "gpu"],
        ["role", "grant-permission", "gpu", "--prefix=true", "readwrite", "/test-"],
        ["user", "grant-role", "eru", "gpu"],
        ["auth", "enable"],
    ):
        subprocess.run([*ctl, *args], check=True, capture_output=True)
    yield member
    member.kill()


def test_user_and_password(auth_etcd: Member, tmp_path: Path) -> None:
    plugin = Plugin(
        [auth_etcd.client_url], tmp_path, auth={"username": "eru", "password": "eru-secret"}
    )
    plugin.add("n1", CARDS)
    assert counts(plugin.info("n1")["capacity"]) == CARDS


@pytest.mark.parametrize(
    "auth", [{"username": "eru", "password": "wrong"}, {"username": "", "password": ""}]
)
def test_wrong_or_missing_credentials_give_a_clear_error(
    auth_etcd: Member, tmp_path: Path, auth: dict[str, str]
) -> None:
    plugin = Plugin([auth_etcd.client_url], tmp_path, timeout=2, auth=auth)
    line = plugin.fails("add-node", {"nodename": "n1", "resource": R(CARDS)})
    assert "node n1" in line
    assert "auth" in line or "user" in line
