"""Configuration parsing and lookup: ledger/config.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.config import DEFAULT_FILE, ENV_VAR, config_path, load, parse
from ledger.errors import PluginError

MINIMAL = 'etcd:\n  machines: ["http://127.0.0.1:2379"]\n'


def test_minimal_config_gets_defaults() -> None:
    etcd = parse(MINIMAL).etcd
    assert etcd.machines == ["http://127.0.0.1:2379"]
    assert etcd.prefix == "/eru"
    assert etcd.timeout == 5.0
    assert etcd.max_attempts == 64
    assert etcd.auth.username == ""
    assert etcd.auth.password == ""
    assert (etcd.ca, etcd.cert, etcd.key) == ("", "", "")
    assert etcd.tls is False


def test_full_core_format() -> None:
    text = """
etcd:
  machines: ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]
  prefix: "/eru-gpu"
  auth: {username: "root", password: "secret"}
  ca: /etc/ca.pem
  cert: /etc/cert.pem
  key: /etc/key.pem
  timeout: 2.5
  max_attempts: 10
"""
    etcd = parse(text).etcd
    assert etcd.machines == ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]
    assert etcd.prefix == "/eru-gpu"
    assert (etcd.auth.username, etcd.auth.password) == ("root", "secret")
    assert etcd.tls is True
    assert etcd.timeout == 2.5
    assert etcd.max_attempts == 10


def test_integer_timeout_is_accepted() -> None:
    assert parse("etcd: {machines: [a], timeout: 3}").etcd.timeout == 3.0


@pytest.mark.parametrize(
    "files", [("ca.pem", "", ""), ("", "cert.pem", "key.pem"), ("ca.pem", "cert.pem", "")]
)
def test_tls_needs_all_three_files(files: tuple[str, str, str]) -> None:
    ca, cert, key = files
    text = f'etcd: {{machines: [a], ca: "{ca}", cert: "{cert}", key: "{key}"}}'
    assert parse(text).etcd.tls is False


def test_unknown_keys_are_ignored() -> None:
    etcd = parse("other: 1\netcd: {machines: [a], colour: blue}").etcd
    assert etcd.machines == ["a"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("etcd: {prefix: /x}", "machines"),
        ("etcd: {machines: []}", "machines"),
        ("etcd: {machines: a}", "machines"),
        ("etcd: {machines: [a], timeout: 0}", "timeout"),
        ("etcd: {machines: [a], timeout: -1}", "timeout"),
        ("etcd: {machines: [a], timeout: 25.5}", "timeout"),
        ("etcd: {machines: [a], timeout: fast}", "timeout"),
        ("etcd: {machines: [a], max_attempts: 0}", "max_attempts"),
        ("etcd: {machines: [a], max_attempts: 1001}", "max_attempts"),
        ("other: 1", "etcd"),
    ],
)
def test_invalid_settings_are_plugin_errors(text: str, fragment: str) -> None:
    with pytest.raises(PluginError) as info:
        parse(text, source="gpu.yaml")
    message = str(info.value)
    assert fragment in message
    assert "gpu.yaml" in message
    assert "\n" not in message


def test_timeout_bounds_are_inclusive_at_25() -> None:
    assert parse("etcd: {machines: [a], timeout: 25}").etcd.timeout == 25.0


@pytest.mark.parametrize("text", ["", "# nothing\n", "- a\n- b\n", "just a string"])
def test_empty_or_non_mapping_documents_are_plugin_errors(text: str) -> None:
    with pytest.raises(PluginError):
        parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "etcd: [a",
        "etcd:\n  machines: [a\n  b: {",
        "etcd: {machines: [a]}\n  bad indent: :\n- x",
        'etcd: "unterminated',
        "\tetcd: {}",
    ],
)
def test_invalid_yaml_is_a_one_line_plugin_error(text: str) -> None:
    with pytest.raises(PluginError) as info:
        parse(text, source="/etc/gpu.yaml")
    message = str(info.value)
    assert "not valid YAML" in message
    assert "/etc/gpu.yaml" in message
    assert "\n" not in message
    assert "\r" not in message
    assert info.value.reason == message


# --- lookup ----------------------------------------------------------------------------------


def test_config_path_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert config_path(None) == Path(DEFAULT_FILE) == Path("gpu.yaml")
    monkeypatch.setenv(ENV_VAR, "/from/env.yaml")
    assert config_path(None) == Path("/from/env.yaml")
    assert config_path("/explicit.yaml") == Path("/explicit.yaml")


def test_empty_env_var_falls_back_to_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "")
    assert config_path(None) == Path(DEFAULT_FILE)


def test_load_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text("etcd: {machines: [http://e:2379], prefix: /p}\n")
    config = load(str(path))
    assert config.etcd.machines == ["http://e:2379"]
    assert config.etcd.prefix == "/p"


def test_load_uses_the_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "other.yaml"
    path.write_text(MINIMAL)
    monkeypatch.setenv(ENV_VAR, str(path))
    assert load().etcd.machines == ["http://127.0.0.1:2379"]


def test_load_of_a_missing_file_is_a_one_line_plugin_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(PluginError) as info:
        load(str(missing))
    message = str(info.value)
    assert "not found" in message
    assert str(missing) in message
    assert "\n" not in message


def test_load_of_a_directory_is_a_plugin_error(tmp_path: Path) -> None:
    with pytest.raises(PluginError) as info:
        load(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_load_names_the_file_in_validation_errors(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text("etcd: {}\n")
    with pytest.raises(PluginError, match="machines") as info:
        load(str(path))
    assert str(path) in str(info.value)
