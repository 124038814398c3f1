"""etcd over TLS (server verified; client certificates optional), and with user/password auth;
certificates made here. A URL's scheme decides TLS, and a password never goes out in clear."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd_server import Member
from tests.plugin import Plugin, R, Result, counts, failure_line
from tests.secured_etcd import (
    TLSFiles,
    add_user,
    start_auth_member,
    start_https_member,
    start_member,
    start_tls_member,
)

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

CARDS = {"nvidia-3090": 2}


@pytest.fixture
def tls_etcd(tmp_path: Path) -> Iterator[tuple[Member, TLSFiles]]:
    member, files = start_tls_member(tmp_path)
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


def test_tls_server_refuses_a_plugin_without_a_client_certificate(
    tls_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    member, files = tls_etcd
    plugin = Plugin([member.client_url], tmp_path, timeout=2, ca=files.ca_file)
    line = plugin.fails("get-node-resource-info", {"nodename": "n1"})
    assert "etcd" in line


@pytest.mark.parametrize("program", ["resource-gpu", "resource-storage"])
def test_a_debug_variable_of_the_other_program_leaves_stderr_one_line(
    program: str, tls_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    """Core's environment may keep one plugin's debug switch (set to debug that plugin): the
    other still mutes gRPC's own logs, so a refused handshake is one line on stderr."""
    member, files = tls_etcd
    plugin = Plugin([member.client_url], tmp_path, program=program, timeout=2, ca=files.ca_file)
    other = "RESOURCE_STORAGE_DEBUG" if program == "resource-gpu" else "RESOURCE_GPU_DEBUG"
    result = plugin.run("get-nodes-resource-info", {"nodenames": ["n1"]}, env={other: "1"})
    assert "etcd" in failure_line(result, "get-nodes-resource-info", program)


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
    member = start_auth_member(tmp_path)
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


@pytest.fixture
def jwt_etcd(tmp_path: Path) -> Iterator[Member]:
    member = start_auth_member(tmp_path, jwt=True)
    yield member
    member.kill()


def authentications(member: Member) -> int:
    """What etcd has committed through raft; while only reads are made, its authentications
    (etcd proposes each, JWT or not)."""
    with urllib.request.urlopen(f"{member.client_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("etcd_server_proposals_committed")]
    return int(float(line.split()[-1]))


def test_jwt_tokens_outlive_an_auth_change_of_another_user(
    jwt_etcd: Member, tmp_path: Path
) -> None:
    """etcd refuses a JWT had before any change of users or roles. A process that keeps its
    token (a warm call process of the helper, in the resident mode; this one otherwise)
    authenticates once more, once, and serves on; it never fails a call for it."""
    plugin = Plugin(
        [jwt_etcd.client_url], tmp_path, auth={"username": "eru", "password": "eru-secret"}
    )
    read = {"nodename": "n1"}
    assert plugin.through("add-node", {"nodename": "n1", "resource": R(CARDS)}).status == 0
    for _ in range(2):
        assert plugin.through("get-node-resource-info", read).status == 0
    add_user(jwt_etcd, "x")
    before = authentications(jwt_etcd)
    for _ in range(3):
        result = plugin.through("get-node-resource-info", read)
        assert (result.status, result.stderr) == (0, "")
        assert counts(result.answer["capacity"]) == CARDS
    assert authentications(jwt_etcd) == before + 1


def test_a_wrong_password_on_jwt_tokens_fails_in_one_line(jwt_etcd: Member, tmp_path: Path) -> None:
    """Asked once (``tests/ledger/test_auth_tokens.py`` counts it), never again in a loop."""
    plugin = Plugin(
        [jwt_etcd.client_url], tmp_path, timeout=2, auth={"username": "eru", "password": "no"}
    )
    result = plugin.through("get-node-resource-info", {"nodename": "n1"})
    assert "authentication failed" in failure_line(result, "get-node-resource-info")


# --- the URL's scheme decides TLS; https always verifies the server -------------------------


@pytest.fixture
def https_etcd(tmp_path: Path) -> Iterator[tuple[Member, TLSFiles]]:
    """etcd serving TLS without asking for client certificates."""
    member, files = start_https_member(tmp_path)
    yield member, files
    member.kill()


def test_https_with_only_a_ca_verifies_the_server_and_needs_no_client_certificate(
    https_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    member, files = https_etcd
    plugin = Plugin([member.client_url], tmp_path, ca=files.ca_file)
    plugin.add("n1", CARDS)
    assert counts(plugin.info("n1")["capacity"]) == CARDS


def test_a_bare_host_port_speaks_tls_when_a_ca_is_set(
    https_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    member, files = https_etcd
    plugin = Plugin([f"127.0.0.1:{member.client_port}"], tmp_path, ca=files.ca_file)
    plugin.add("n1", CARDS)
    assert counts(plugin.info("n1")["capacity"]) == CARDS


def test_https_without_a_ca_verifies_against_the_system_cas(
    https_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    """The test CA is in no system store, so the server's certificate fails verification."""
    member, _ = https_etcd
    plugin = Plugin([member.client_url], tmp_path, timeout=2)
    line = plugin.fails("get-node-resource-info", {"nodename": "n1"}).lower()
    assert "certificate" in line and "verif" in line, line


def test_https_verifies_the_host_name(tmp_path: Path) -> None:
    files = TLSFiles(tmp_path, server_names=("etcd.example",))
    health = ssl.create_default_context(cafile=files.ca_file)
    health.check_hostname = False
    member = start_member(
        tmp_path, scheme="https", health_context=health,
        extra_args=["--cert-file", files.server_cert, "--key-file", files.server_key],
    )  # fmt: skip
    try:
        plugin = Plugin([member.client_url], tmp_path, timeout=2, ca=files.ca_file)
        line = plugin.fails("get-node-resource-info", {"nodename": "n1"}).lower()
        assert "certificate" in line and "verif" in line and "host" in line, line
    finally:
        member.kill()


def test_tls_files_with_a_plain_http_url_are_refused(
    tls_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    """Never silently plain: the files say TLS, the URL says not; the operator must choose."""
    member, files = tls_etcd
    url = f"http://127.0.0.1:{member.client_port}"
    plugin = Plugin([url], tmp_path, ca=files.ca_file, cert=files.client_cert, key=files.client_key)
    line = plugin.fails("get-node-resource-info", {"nodename": "n1"})
    assert repr(url) in line and "https://" in line, line


def test_tls_files_relative_to_the_config_from_another_working_directory(
    tls_etcd: tuple[Member, TLSFiles], tmp_path: Path
) -> None:
    member, files = tls_etcd
    here, elsewhere = tmp_path / "plugin", tmp_path / "elsewhere"
    (here / "tls").mkdir(parents=True)
    elsewhere.mkdir()
    for name in (files.ca_file, files.client_cert, files.client_key):
        shutil.copy(name, here / "tls")
    plugin = Plugin(
        [member.client_url], here, ca="tls/ca.pem", cert="tls/client.pem", key="tls/client-key.pem"
    )  # fmt: skip
    request = {"nodename": "n1", "resource": R(CARDS)}
    assert ok(plugin.run("add-node", request, cwd=elsewhere)).status == 0
    info = ok(plugin.run("get-node-resource-info", {"nodename": "n1"}, cwd=elsewhere))
    assert counts(info.answer["capacity"]) == CARDS


def ok(result: Result) -> Result:
    assert (result.status, result.stderr) == (0, ""), result
    return result


@pytest.mark.parametrize("setting", ["ca", "cert", "key"])
def test_an_unreadable_tls_file_is_named(setting: str, tmp_path: Path) -> None:
    files = TLSFiles(tmp_path)
    missing = str(tmp_path / "missing.pem")
    tls = {"ca": files.ca_file, "cert": files.client_cert, "key": files.client_key}
    plugin = Plugin(["https://127.0.0.1:9"], tmp_path, timeout=2, **{**tls, setting: missing})
    line = plugin.fails("get-node-resource-info", {"nodename": "n1"})
    assert f"etcd.{setting} file {missing!r}" in line, line


# --- a password never crosses in clear ------------------------------------------------------


class Eavesdropper:
    """A TCP listener that answers nothing and keeps what each connection sent first."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.heard: list[bytes] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._done.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:  # a timeout: look at the flag again
                continue
            with connection:
                connection.settimeout(0.3)
                data = b""
                try:
                    while chunk := connection.recv(65536):
                        data += chunk
                except OSError:
                    pass
                self.heard.append(data)

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        self._listener.close()


@pytest.mark.parametrize("form", ["https", "bare host:port with a ca"])
def test_the_password_goes_out_only_inside_tls(form: str, tmp_path: Path) -> None:
    files = TLSFiles(tmp_path)
    eavesdropper = Eavesdropper()
    try:
        address = f"127.0.0.1:{eavesdropper.port}"
        machines, tls = ([f"https://{address}"], {}) if form == "https" else (
            [address], {"ca": files.ca_file}
        )  # fmt: skip
        secret = "pw-must-never-leak"
        plugin = Plugin(
            machines, tmp_path, timeout=1, auth={"username": "eru", "password": secret}, **tls
        )
        plugin.fails("get-node-resource-info", {"nodename": "n1"})
    finally:
        eavesdropper.close()
    assert eavesdropper.heard, "the plugin never connected"
    for data in eavesdropper.heard:
        assert secret.encode() not in data
        assert data[:1] == b"\x16", f"not a TLS handshake: {data[:40]!r}"  # TLS record: handshake
    assert json.loads(plugin.config.read_text())["etcd"]["auth"]["password"] == secret
