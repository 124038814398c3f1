"""What a call tells the helper of its caller's environment, and what the helper compares with
its own (``commands.resident.client.environment``): the values themselves, never a name of
them, so that only a caller whose home and trust read exactly as the starter's is served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from resource_extend.commands.resident import client as resident


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """A caller with an absolute home and no CA settings, in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/eru")
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_values_whose_short_names_collide_are_told_apart(plain: pytest.MonkeyPatch) -> None:
    """Round six: digits swapped 31 bytes apart share a short name (256**31 is 1 modulo the
    name's prime); the values sent differ."""
    filler = "x" * 26
    ours, theirs = f"/srv/eru/dc1/{filler}/ca2.pem", f"/srv/eru/dc2/{filler}/ca1.pem"
    assert resident.short_name(ours.encode()) == resident.short_name(theirs.encode())
    plain.setenv("SSL_CERT_FILE", ours)
    sent = resident.environment()
    plain.setenv("SSL_CERT_FILE", theirs)
    assert resident.environment() != sent


def test_an_unset_value_is_not_a_value_that_reads_as_unset(plain: pytest.MonkeyPatch) -> None:
    """Unset (the system's CAs) against set to "None", or to nothing at all."""
    unset = resident.environment()
    plain.setenv("SSL_CERT_DIR", "None")
    named_none = resident.environment()
    plain.setenv("SSL_CERT_DIR", "")
    empty = resident.environment()
    assert len({unset, named_none, empty}) == 3


def test_a_relative_value_is_read_with_the_working_directory(
    plain: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``SSL_CERT_FILE=certs/ca.pem`` names another file in another directory (a helper runs
    in ``/``); absolute values need no working directory, so a caller anywhere is served."""
    plain.setenv("SSL_CERT_FILE", "/etc/eru/ca.pem")
    absolute_here = resident.environment()
    (tmp_path / "elsewhere").mkdir()
    os.chdir(tmp_path / "elsewhere")
    assert resident.environment() == absolute_here
    plain.setenv("SSL_CERT_DIR", "/etc/ssl/certs:certs")  # a list, one of them relative
    relative_there = resident.environment()
    os.chdir(tmp_path)
    assert resident.environment() != relative_there


def test_what_is_sent_fits_a_frame(plain: pytest.MonkeyPatch) -> None:
    """Hex: no byte of a value (a newline, say) can end or split the call's frame."""
    plain.setenv("HOME", "/home/a\nb")  # (NUL cannot be in the environment)
    sent = resident.environment()
    assert sent.isalnum() and b"\n" not in sent and b"\0" not in sent
