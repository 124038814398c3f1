"""etcd members of their own, secured: over TLS with certificates made here (``trustme``), or
with auth on. For the tests (``tests/test_security.py`` and others) and for ``scripts/bench``'s
secured rows; nothing here needs pytest."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import trustme

from tests.etcd_server import Member, etcdctl_binary, free_port


class TLSFiles:
    def __init__(
        self, directory: Path, server_names: tuple[str, ...] = ("127.0.0.1", "localhost")
    ) -> None:
        self.ca = trustme.CA()
        self.directory = directory
        self.ca_file = self._write("ca.pem", self.ca.cert_pem.bytes())
        server = self.ca.issue_cert(*server_names)
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


def start_tls_member(directory: Path) -> tuple[Member, TLSFiles]:
    """A member serving TLS with certificates made in ``directory``, asking for client
    certificates."""
    files = TLSFiles(directory)
    member = start_member(
        directory,
        scheme="https",
        health_context=files.client_context(),
        extra_args=[
            "--cert-file", files.server_cert, "--key-file", files.server_key,
            "--trusted-ca-file", files.ca_file, "--client-cert-auth",
        ],
    )  # fmt: skip
    return member, files


def start_https_member(directory: Path) -> tuple[Member, TLSFiles]:
    """A member serving TLS with certificates made in ``directory``, asking for none."""
    files = TLSFiles(directory)
    member = start_member(
        directory, scheme="https", health_context=ssl.create_default_context(cafile=files.ca_file),
        extra_args=["--cert-file", files.server_cert, "--key-file", files.server_key],
    )  # fmt: skip
    return member, files


def jwt_token_args(directory: Path) -> list[str]:
    """etcd's arguments for JWT auth tokens (what etcd's docs advise for production), signed
    with an RSA key made in ``directory``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = directory / "jwt.key"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public = directory / "jwt.pub"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return [f"--auth-token=jwt,pub-key={public},priv-key={private},sign-method=RS256"]


def start_auth_member(tmp_path: Path, *, jwt: bool = False) -> Member:
    """A member with auth on: user eru (password eru-secret) may read and write /test-*; its
    tokens etcd's simple ones, or JWTs (``jwt``)."""
    member = start_member(tmp_path, extra_args=jwt_token_args(tmp_path) if jwt else None)
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
    return member


def add_user(member: Member, name: str) -> None:
    """A user added as root: an auth change that has nothing to do with the plugin's user,
    after which etcd refuses every token had before it (JWTs as much as simple ones)."""
    ctl = [etcdctl_binary(), f"--endpoints={member.client_url}", "--user=root:root-secret"]
    argv = [*ctl, "user", "add", name, f"--new-user-password={name}-secret"]
    subprocess.run(argv, check=True, capture_output=True)
