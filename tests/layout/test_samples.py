"""``sample-config``: the files an install needs come with the package, each program's own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from resource_extend.commands import programs
from resource_extend.commands.sample_config import SAMPLES, sample
from tests.plugin import binary

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", sorted(programs.programs()))
@pytest.mark.parametrize("what", sorted(SAMPLES))
def test_each_sample_is_the_file_under_docs(name: str, what: str) -> None:
    serving = programs.programs()[name]
    file = serving.own_words(SAMPLES[what][0])
    assert sample(serving, what) == (DOCS / file).read_text()


def test_the_two_units_differ_only_in_the_program_they_run() -> None:
    """Two files, so each can be copied as it is: kept one unit by this test."""
    gpu = (DOCS / "resource-gpu-exporter.service").read_text()
    storage = (DOCS / "resource-storage-exporter.service").read_text()
    swapped = (
        storage.replace("resource-storage", "resource-gpu")
        .replace("storage.yaml", "gpu.yaml")
        .replace("storage ledger", "GPU ledger")
        .replace("18465", "18464")
    )
    gpu_line = (
        "# resource-storage-exporter.service is the same unit for resource-storage (port 18465)."
    )
    other = "# resource-gpu-exporter.service is the same unit for resource-gpu (port 18464)."
    assert swapped.replace(other, gpu_line) == gpu


@pytest.mark.parametrize("name", sorted(programs.programs()))
def test_the_command_prints_the_config_sample_by_default(name: str) -> None:
    shown = subprocess.run(
        [*binary(name), "sample-config"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == (DOCS / "plugin.yaml.sample").read_text()


def test_an_unknown_sample_is_a_usage_error_listing_the_known_ones() -> None:
    shown = subprocess.run(
        [*binary(), "sample-config", "unti"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert shown.returncode == 2 and not shown.stdout
    assert "'unti' is not one of 'config', 'unit', 'alerts', 'dashboard'" in shown.stderr


def test_the_units_raise_the_open_file_limit() -> None:
    """systemd's default soft limit is 1,024 open files: the exporter's connections and etcd's
    need more under load (``tests/test_exporter.py`` runs it at 1,024 with 2,000 idle
    connections)."""
    for unit in ("resource-gpu-exporter.service", "resource-storage-exporter.service"):
        lines = (DOCS / unit).read_text().splitlines()
        [limit] = [line for line in lines if line.startswith("LimitNOFILE=")]
        assert int(limit.split("=")[1]) >= 65536, unit
