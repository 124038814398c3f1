"""Configuration parsing and lookup: ledger/host/config.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.ledger.host.config import (
    ENV_VAR,
    MAX_CONFIG_BYTES,
    StreamsConfig,
    config_path,
    load,
    parse,
)
from resource_extend.ledger.host.endpoints import Endpoint
from resource_extend.ledger.model.errors import PluginError
from tests.unit.strategies import FAST

MINIMAL = 'etcd:\n  machines: ["http://127.0.0.1:2379"]\n'


def test_minimal_config_gets_defaults() -> None:
    etcd = parse(MINIMAL).etcd
    assert etcd.machines == ["http://127.0.0.1:2379"]
    assert etcd.prefix == "/eru"
    assert etcd.timeout == 5.0
    assert etcd.max_attempts == 0  # no count: as long as etcd.timeout lasts
    assert etcd.auth.username == ""
    assert etcd.auth.password == ""
    assert (etcd.ca, etcd.cert, etcd.key) == ("", "", "")
    assert etcd.endpoints == [Endpoint(host="127.0.0.1", port=2379, tls=False)]


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n"])
def test_an_empty_config_says_it_is_empty(text: str) -> None:
    """An empty file is what a reader sees mid-write when a tool truncates before writing."""
    with pytest.raises(PluginError, match=r"config 'gpu.yaml' is empty: it needs .* etcd"):
        parse(text, source="gpu.yaml")


def test_full_core_format() -> None:
    text = """
etcd:
  machines: ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
  prefix: "/eru-gpu"
  auth: {username: "root", password: "secret"}
  ca: /etc/ca.pem
  cert: /etc/cert.pem
  key: /etc/key.pem
  timeout: 2.5
  max_attempts: 10
"""
    etcd = parse(text).etcd
    assert etcd.machines == ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
    assert etcd.prefix == "/eru-gpu"
    assert (etcd.auth.username, etcd.auth.password) == ("root", "secret")
    assert (etcd.ca, etcd.cert, etcd.key) == ("/etc/ca.pem", "/etc/cert.pem", "/etc/key.pem")
    assert [e.tls for e in etcd.endpoints] == [True, True]
    assert etcd.timeout == 2.5
    assert etcd.max_attempts == 10


def test_integer_timeout_is_accepted() -> None:
    assert parse("etcd: {machines: [a], timeout: 3}").etcd.timeout == 3.0


def test_cores_own_keys_are_accepted_and_unused() -> None:
    """The upstream plugins read a file shaped like core's config: its keys are not typos."""
    text = "log_level: INFO\netcd: {machines: [a], lock_prefix: /lock}\nscheduler: {maxshare: -1}"
    config = parse(text)
    assert config.etcd.machines == ["a"]
    assert config.unrecognised == []


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("etcd: {machines: [a], timeot: 3}", "etcd.timeot (did you mean etcd.timeout?)"),
        ("etcd: {machines: [a], colour: blue}", "etcd.colour"),
        ("etcd: {machines: [a], auth: {usrname: x}}", "etcd.auth.usrname (did you mean "),
        ("etcd: {machines: [a]}\nstreams: {max_event: 9}", "streams.max_event (did you mean"),
        ("etcd: {machines: [a]}\nresidnet: false", "residnet (did you mean resident?)"),
        ("etcd: {machines: [a]}\nstream: {}", "stream (did you mean streams?)"),
    ],
)
def test_an_unknown_key_is_refused_naming_it_and_the_nearest_known_one(
    text: str, named: str
) -> None:
    with pytest.raises(PluginError) as info:
        parse(text, source="gpu.yaml")
    message = str(info.value)
    assert message.startswith("config 'gpu.yaml': unknown key ")
    assert named in message
    assert "\n" not in message


def test_every_unknown_key_is_named_at_once() -> None:
    with pytest.raises(PluginError, match=r"unknown keys etcd.timeot .*, etcd.prefx "):
        parse("etcd: {machines: [a], timeot: 3, prefx: /x}")


def test_a_top_level_key_like_none_of_ours_is_kept_as_unrecognised() -> None:
    """A file shared with a newer core may hold keys of its own: noted (doctor reports them),
    not refused, so an upgrade of core cannot break every call."""
    config = parse("etcd: {machines: [a]}\nmetrics_exporter: {port: 1}\nresident: false")
    assert config.unrecognised == ["metrics_exporter"]
    assert config.resident is False


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
        ("etcd: {machines: [a], max_attempts: -1}", "max_attempts"),
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
    assert "<unicode string>" not in message  # the file is named once, not as a stand-in
    assert "\n" not in message
    assert "  " not in message  # PyYAML's indented lines, joined by one space each
    assert "\r" not in message
    assert info.value.reason == message


# --- lookup ----------------------------------------------------------------------------------


def test_config_path_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert config_path(None, "gpu.yaml") == "gpu.yaml"
    monkeypatch.setenv(ENV_VAR, "/from/env.yaml")
    assert config_path(None, "gpu.yaml") == "/from/env.yaml"
    assert config_path("/explicit.yaml", "gpu.yaml") == "/explicit.yaml"


def test_empty_env_var_falls_back_to_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "")
    assert config_path(None, "gpu.yaml") == "gpu.yaml"


def test_without_a_default_a_config_must_be_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(PluginError, match="no config file named"):
        config_path(None)


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
    assert load(default="gpu.yaml").etcd.machines == ["http://127.0.0.1:2379"]


def test_load_of_a_missing_file_is_a_one_line_plugin_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(PluginError) as info:
        load(str(missing))
    message = str(info.value)
    assert "not found" in message
    assert str(missing) in message
    assert "\n" not in message


def test_load_names_the_file_in_validation_errors(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text("etcd: {}\n")
    with pytest.raises(PluginError, match="machines") as info:
        load(str(path))
    assert str(path) in str(info.value)


# --- etcd.machines: each entry a valid URL, its scheme deciding TLS --------------------------


def etcd_with(machines: list[str], **settings: object) -> str:
    """A config document (JSON is YAML) with these machines and other etcd settings."""
    import json

    return json.dumps({"etcd": {"machines": machines, **settings}})


@pytest.mark.parametrize(
    "entry",
    ["http://[::1", "http://host:99999", "http://host:port", "ftp://x", "http://", "", "http://:1",
     "https://h:0", "http://ho st:1", "http://h:1/v3", "http://u:p@h:1", "unix:///run/etcd.sock",
     "\thttp://h:1"],
)  # fmt: skip
def test_a_bad_machines_entry_is_a_config_error_naming_it(entry: str) -> None:
    with pytest.raises(PluginError) as info:
        parse(etcd_with([entry]), source="gpu.yaml")
    message = str(info.value)
    assert "gpu.yaml" in message
    assert f"etcd.machines entry {entry!r}" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("entry", "endpoint"),
    [
        ("http://10.0.0.1:2379", Endpoint(host="10.0.0.1", port=2379, tls=False)),
        ("https://etcd.example:2379", Endpoint(host="etcd.example", port=2379, tls=True)),
        ("HTTPS://Etcd.Example", Endpoint(host="etcd.example", port=2379, tls=True)),
        ("http://[::1]:23790/", Endpoint(host="::1", port=23790, tls=False)),
        ("10.0.0.1:2380", Endpoint(host="10.0.0.1", port=2380, tls=False)),
        ("etcd", Endpoint(host="etcd", port=2379, tls=False)),
    ],
)
def test_the_scheme_decides_tls(entry: str, endpoint: Endpoint) -> None:
    assert parse(etcd_with([entry])).etcd.endpoints == [endpoint]


def test_https_verifies_with_the_system_cas_when_no_ca_is_set() -> None:
    etcd = parse(etcd_with(["https://10.0.0.1:2379"])).etcd
    assert etcd.endpoints[0].tls is True
    assert etcd.ca == ""


@pytest.mark.parametrize(
    "files",
    [
        {"ca": "/ca.pem"},
        {"cert": "/c.pem", "key": "/k.pem"},
        {"ca": "/a", "cert": "/c", "key": "/k"},
    ],
)
def test_a_bare_host_port_speaks_tls_when_tls_files_are_set(files: dict[str, str]) -> None:
    etcd = parse(etcd_with(["10.0.0.1:2379", "https://10.0.0.2:2379"], **files)).etcd
    assert [e.tls for e in etcd.endpoints] == [True, True]


@pytest.mark.parametrize("files", [{"ca": "/ca.pem"}, {"cert": "/c.pem", "key": "/k.pem"}])
def test_tls_files_beside_a_plain_http_url_are_refused(files: dict[str, str]) -> None:
    with pytest.raises(PluginError) as info:
        parse(etcd_with(["https://a:2379", "http://b:2379"], **files), source="gpu.yaml")
    message = str(info.value)
    assert "'http://b:2379'" in message
    assert "https://" in message


@pytest.mark.parametrize(
    "files", [{"cert": "/c.pem"}, {"key": "/k.pem"}, {"ca": "/a", "key": "/k"}]
)
def test_a_client_certificate_needs_both_cert_and_key(files: dict[str, str]) -> None:
    with pytest.raises(PluginError, match=r"etcd\.cert.*etcd\.key"):
        parse(etcd_with(["https://a:2379"], **files))


# --- credentials never go out in clear unless asked to --------------------------------------

SECRET = {"username": "eru", "password": "secret"}


@pytest.mark.parametrize("entry", ["http://10.0.0.1:2379", "etcd.example:2379", "http://127.evil"])
def test_credentials_over_plain_http_to_another_host_are_refused(entry: str) -> None:
    with pytest.raises(PluginError) as info:
        parse(etcd_with([entry], auth=SECRET), source="gpu.yaml")
    message = str(info.value)
    assert repr(entry) in message
    assert "etcd.auth.allow_plain_http" in message
    assert "\n" not in message


def test_allow_plain_http_lets_credentials_go_in_clear() -> None:
    auth = {**SECRET, "allow_plain_http": True}
    etcd = parse(etcd_with(["http://10.0.0.1:2379"], auth=auth)).etcd
    assert etcd.auth.allow_plain_http is True
    assert etcd.endpoints[0].tls is False


@pytest.mark.parametrize(
    "entry",
    ["http://127.0.0.1:2379", "http://127.1.2.3", "http://localhost:2379", "http://[::1]:2379",
     "https://10.0.0.1:2379", "localhost:2379"],
)  # fmt: skip
def test_credentials_to_loopback_or_over_tls_need_no_opt_in(entry: str) -> None:
    assert parse(etcd_with([entry], auth=SECRET)).etcd.auth.allow_plain_http is False


def test_no_credentials_no_opt_in_needed() -> None:
    assert parse(etcd_with(["http://10.0.0.1:2379"])).etcd.endpoints[0].tls is False


# --- relative paths resolve against the config file's directory ------------------------------


def test_relative_paths_resolve_against_the_config_files_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    directory = tmp_path / "etc" / "eru"
    directory.mkdir(parents=True)
    (directory / "gpu.yaml").write_text(
        etcd_with(["https://e:2379"], ca="tls/ca.pem", cert="~/client.pem", key="/abs/key.pem")
        [:-1] + ', "streams": {"max_events": 10, "export_dir": "exports"}}'
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for path in (directory / "gpu.yaml", Path("../etc/eru/gpu.yaml")):
        config = load(str(path))
        assert config.etcd.ca == str(directory / "tls" / "ca.pem")
        assert config.etcd.cert == str(home / "client.pem")
        assert config.etcd.key == "/abs/key.pem"
        assert config.streams.export_dir == str(directory / "exports")


def test_parse_resolves_against_base_or_leaves_relative_paths_to_the_working_directory() -> None:
    text = etcd_with(["a"], ca="ca.pem")
    assert parse(text).etcd.ca == "ca.pem"
    assert parse(text, base="/etc/eru").etcd.ca == "/etc/eru/ca.pem"


# --- what a config file may be ---------------------------------------------------------------

IN_CHILD = """
import sys
from resource_extend.ledger.host.config import load
from resource_extend.ledger.model.errors import PluginError
try:
    load(sys.argv[1])
except PluginError as exc:
    print("PluginError:", exc)
except BaseException as exc:
    print("escaped:", type(exc).__name__, exc)
else:
    print("loaded")
"""


def load_in_a_child(path: str) -> str:
    """What ``load(path)`` says, run where a hang or a runaway read cannot take the test down:
    in a child process, killed after a few seconds, with its memory capped."""

    def cap_memory() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    try:
        done = subprocess.run(
            [sys.executable, "-c", IN_CHILD, path], capture_output=True, timeout=15,
            preexec_fn=cap_memory, cwd=Path(__file__).parents[2],
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"load({path!r}) hung")
    return done.stdout.decode().strip() or done.stderr.decode().strip().splitlines()[-1]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "gpu.yaml"
    os.mkfifo(fifo)
    said = load_in_a_child(str(fifo))
    assert said.startswith("PluginError:"), said
    assert str(fifo) in said and "not a regular file" in said


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "/"])
def test_devices_and_directories_are_refused(path: str) -> None:
    said = load_in_a_child(path)
    assert said.startswith("PluginError:"), said
    assert repr(path) in said and "not a regular file" in said


def test_a_directory_is_refused_in_process(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="not a regular file") as info:
        load(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text(MINIMAL + "#" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(PluginError, match="larger than") as info:
        load(str(path))
    assert str(path) in str(info.value)


def test_a_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text(MINIMAL + "#" * (MAX_CONFIG_BYTES - len(MINIMAL) - 1) + "\n")
    assert path.stat().st_size == MAX_CONFIG_BYTES
    assert load(str(path)).etcd.machines == ["http://127.0.0.1:2379"]


def test_a_file_that_is_not_utf8_is_a_one_line_plugin_error(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_bytes(b"etcd: {machines: [a], prefix: /caf\xe9}\n")
    with pytest.raises(PluginError, match="UTF-8") as info:
        load(str(path))
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unreadable_file_is_a_plugin_error(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text(MINIMAL)
    path.chmod(0)
    if os.access(path, os.R_OK):  # root, whom permissions do not stop: a file whose read fails
        path = Path("/proc/self/mem")
    with pytest.raises(PluginError, match="cannot read") as info:
        load(str(path))
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_the_default_file_in_a_deleted_working_directory_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(PluginError, match="not found") as info:
        load(default="gpu.yaml")
    assert "gpu.yaml" in str(info.value)
    assert "\n" not in str(info.value)


# --- the resident helper's cache follows the file's content ----------------------------------


def test_a_change_that_keeps_size_and_mtime_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text("etcd: {machines: [a], prefix: /aa}\n")
    before = path.stat()
    assert load(str(path)).etcd.prefix == "/aa"
    path.write_text("etcd: {machines: [a], prefix: /bb}\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns,
    )  # fmt: skip
    assert load(str(path)).etcd.prefix == "/bb"


def test_an_unchanged_file_is_not_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "gpu.yaml"
    path.write_text(MINIMAL)
    assert load(str(path)) is load(str(path))


def test_the_same_relative_path_from_another_directory_is_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "gpu.yaml").write_text(etcd_with(["a"], ca="ca.pem"))
    monkeypatch.chdir(tmp_path / "one")
    assert load("gpu.yaml").etcd.ca == str(tmp_path / "one" / "ca.pem")
    monkeypatch.chdir(tmp_path / "two")
    assert load("gpu.yaml").etcd.ca == str(tmp_path / "two" / "ca.pem")


# --- nothing but a PluginError ever escapes --------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["etcd: {machines: [a]}\nwhen: 2001-13-01\n", "etcd: {machines: [a], prefix: 2001-02-30}",
     "etcd: {machines: &a [*a]}", "[" * 5000, "etcd: {machines: [a]}\n" + "x: &x [*x]\n",
     "etcd: !!binary xx", "{? [a]: 1}", "etcd: !!python/object:os.system {}", "\x00", "\ud800",
     "etcd: {machines: [a]}\n0: 1\n", "1: {machines: [a]}"],
)  # fmt: skip
def test_hostile_documents_are_plugin_errors_or_configs(text: str) -> None:
    try:
        parse(text)
    except PluginError as exc:
        assert "\n" not in str(exc)


@FAST
@given(st.text(alphabet=st.characters(), max_size=200))
def test_any_text_is_a_config_or_a_plugin_error(text: str) -> None:
    with contextlib.suppress(PluginError):
        parse("etcd:\n  machines: [a]\n" + text)


@FAST
@given(st.binary(max_size=200))
def test_any_bytes_in_the_file_are_a_config_or_a_plugin_error(data: bytes) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".yaml") as file:
        file.write(data)
        file.flush()
        with contextlib.suppress(PluginError):
            load(file.name)


def test_the_commented_sample_is_a_valid_config() -> None:
    """docs/plugin.yaml.sample is what operators copy: it must load, with its defaults."""
    sample = Path(__file__).resolve().parents[2] / "docs" / "plugin.yaml.sample"
    loaded = load(str(sample))
    assert loaded.etcd.machines == ["http://127.0.0.1:2379"]
    assert loaded.scheduler.max_deploy_count == 10_000
    assert loaded.resident is True
    defaults = StreamsConfig()
    expected = msgspec.structs.replace(defaults, export_dir=os.path.expanduser(defaults.export_dir))
    assert loaded.streams == expected  # the sample states every default as it is
