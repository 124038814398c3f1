"""A throwaway etcd for the scripts that drive the plugins (``scripts/bench``, ``scripts/demo``):
the same one-member etcd the tests use, a directory of its own, and a runtime directory inside
it for the resident helpers the calls start, which are stopped at the end. The programs are
run as core runs them: the launchers their ``install`` writes, in a plugin directory first on
``PATH``. Nothing of the user's is touched, and nothing is left running."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from resource_extend.commands.programs import programs
from tests.etcd_server import Cluster


@contextmanager
def throwaway_etcd(*, shown: bool = False) -> Iterator[tuple[str, Path]]:
    """The etcd's endpoint and the directory, while inside; ``shown``: each program's
    ``helper --all --stop`` at the end is printed as typed, with its answer."""
    cluster = Cluster(1).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            runtime = Path(tmp, "run")
            runtime.mkdir(mode=0o700)
            os.environ["XDG_RUNTIME_DIR"] = str(runtime)
            installed(Path(tmp, "plugins"))
            try:
                yield cluster.endpoints[0], Path(tmp)
            finally:
                for program in programs():
                    if shown:
                        print(f"\n$ {program} helper --all --stop", flush=True)
                    argv = [program, "helper", "--all", "--stop"]
                    subprocess.run(argv, capture_output=not shown, check=False)
    finally:
        cluster.stop()


def installed(plugins: Path) -> None:
    """Each program's launcher written into ``plugins`` by its ``install`` (the one in this
    Python's venv's ``bin/``), and ``plugins`` put first on ``PATH``: a call by name runs what
    core runs."""
    plugins.mkdir(mode=0o755)
    for program in programs():
        command = str(Path(sys.executable).parent / program)
        subprocess.run([command, "install", str(plugins)], capture_output=True, check=True)
    os.environ["PATH"] = f"{plugins}{os.pathsep}{os.environ.get('PATH', '')}"
