"""What ``pip install`` puts in site-packages: one package, ``resource_extend``, and no generic
top-level names; the gRPC client is an extra, not a dependency."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from resource_extend.commands.launcher import runs
from resource_extend.commands.programs import programs
from resource_extend.commands.sample_config import SAMPLES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # A copy of what the build reads: setuptools leaves a build/ folder in the source tree.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", *(f"scripts/{p}" for p in programs())):
        (source / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    for layer in ("ledger", "commands", "projections", "docs"):
        shutil.copytree(ROOT / layer, source / layer, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    build = ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out)]
    subprocess.run([*pip, *build, str(source)], check=True)
    (built,) = out.glob("*.whl")
    return zipfile.ZipFile(built)


def test_site_packages_gains_one_top_level_package(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    code = {top for top in tops if not top.endswith((".dist-info", ".data"))}
    assert code == {"resource_extend"}
    for layer in ("ledger", "commands", "projections"):
        assert f"resource_extend/{layer}/__init__.py" in wheel.namelist()
    for kind in ("gpu", "storage"):
        assert f"resource_extend/commands/{kind}/__init__.py" in wheel.namelist()
        assert f"resource_extend/projections/{kind}/__init__.py" in wheel.namelist()


def test_the_samples_come_with_the_package_and_no_other_doc(wheel: zipfile.ZipFile) -> None:
    """``sample-config`` reads them from the installed package: a host needs no source tree."""
    shipped = {
        n.split("/", 2)[2] for n in wheel.namelist() if n.startswith("resource_extend/samples/")
    }
    wanted = {file.replace("{prog}", p) for file, _ in SAMPLES.values() for p in programs()}
    assert shipped == wanted


@pytest.mark.parametrize("program", sorted(programs()))
def test_both_commands_are_installed(wheel: zipfile.ZipFile, program: str) -> None:
    (script,) = [n for n in wheel.namelist() if n.endswith(f".data/scripts/{program}")]
    code = ast.parse(wheel.read(script)).body[1:]  # after its docstring: as its launcher ends
    wanted = ast.parse(runs(programs()[program])).body
    assert [ast.dump(line) for line in code] == [ast.dump(line) for line in wanted]


def test_the_grpc_client_is_a_dependency_and_etcd3_is_not(wheel: zipfile.ZipFile) -> None:
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    requires = [
        line.split(":", 1)[1].strip()
        for line in wheel.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    always = {re.split(r"[^\w.-]", r)[0] for r in requires if "extra ==" not in r}
    assert {"grpcio", "protobuf"} <= always and "etcd3" not in always
    assert not [r for r in requires if 'extra == "grpc"' in r]  # kept, empty: old install lines


def test_every_module_of_the_source_tree_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    """setuptools installs only the packages pyproject lists: a new folder must be listed."""
    source = {
        f"resource_extend/{path.relative_to(ROOT).as_posix()}"
        for layer in ("ledger", "commands", "projections")
        for path in (ROOT / layer).rglob("*.py")
    }
    assert source - set(wheel.namelist()) == set()
