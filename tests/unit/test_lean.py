"""What the thin client does of ``os`` without it (``ledger.host.lean``), and the runtime
directory's walk without ``os.path.realpath`` where the base names no link (``rundir``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.commands.resident.client import package_dir, taken_from
from resource_extend.ledger.host import lean, rundir

PARTS = st.lists(st.sampled_from(["a", "b", ".", "..", "", "c d", "é"]), max_size=8)


@given(PARTS, st.booleans())
def test_absolute_is_abspath(parts: list[str], rooted: bool) -> None:
    path = ("/" if rooted else "") + "/".join(parts)
    if path.startswith("//"):  # POSIX lets abspath keep a leading "//"; we read it as "/"
        return
    assert lean.absolute(path or ".") == os.path.abspath(path or ".")


def test_is_file_is_isfile(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    for name in ("file", "link", "dangling", "missing", "."):
        assert lean.is_file(str(tmp_path / name)) == os.path.isfile(tmp_path / name), name


def test_getenv_sees_what_os_environ_was_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOURCE_EXTEND_LEAN_TEST", "told")  # not in posix.environ
    assert lean.getenv("RESOURCE_EXTEND_LEAN_TEST") == "told"
    monkeypatch.delenv("RESOURCE_EXTEND_LEAN_TEST")
    assert lean.getenv("RESOURCE_EXTEND_LEAN_TEST") is None


def test_getenv_without_os_reads_the_process_environment() -> None:
    probe = taken_from(package_dir()) + (  # as a launcher's Python starts: -IS
        "from resource_extend.ledger.host import lean\n"
        "print(lean.getenv('LEAN_VALUE'), lean.getenv('LEAN_MISSING'), 'os' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], env={"LEAN_VALUE": "caf\xe9"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == "café None False\n"


def test_a_base_through_a_link_is_walked_as_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    for base in (tmp_path / "link", f"{tmp_path}/./real/", f"{tmp_path}/link/../real"):
        fd, path = rundir._open_base(str(base))
        try:
            assert path == os.path.realpath(base)
            assert os.path.samestat(os.fstat(fd), os.stat(real))
        finally:
            os.close(fd)
    fd, path = rundir._open_base(f"{real}/")  # no link: as written, less its "/"
    os.close(fd)
    assert path == str(real)


def test_a_base_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        rundir._open_base(str(tmp_path / "file"))
