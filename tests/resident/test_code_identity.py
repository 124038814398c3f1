"""Which code a helper runs is named from one stat of the installed wheel's ``RECORD``, which
every install and upgrade writes anew (so an upgrade, either way, never reaches an old helper);
a source tree, which has none and whose files change under it, is named by every code file.

An installation here is a copy of the code in ``site/resource_extend``, as pip lays it out, run
in a process of its own (the identity is of the code that process imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from resource_extend.commands.program import VERSION
from tests.plugin import copied_code

LOOKED = """
import json, posix
from resource_extend.commands.resident import client
looks = []
def counted(real):
    def look(*args, **kwargs):
        looks.append(real.__name__)
        return real(*args, **kwargs)
    return look
posix.stat, posix.scandir = counted(posix.stat), counted(posix.scandir)  # (os's are these)
print(json.dumps([client.code_identity(), looks]))
"""


def identity(site: Path) -> tuple[str, list[str]]:
    """The installation's code identity, and the looks at the filesystem it took."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", LOOKED], env=env, capture_output=True, text=True, check=True
    )
    name, looks = json.loads(done.stdout)
    return name, looks


def install(site: Path, record: str) -> None:
    """What pip does last: the dist-info's ``RECORD`` written anew (a new file, whatever it
    says)."""
    dist_info = site / f"resource_extend-{VERSION}.dist-info"
    dist_info.mkdir(exist_ok=True)
    staged = dist_info / "RECORD.new"
    staged.write_text(record)
    os.replace(staged, dist_info / "RECORD")


def test_an_installed_wheel_is_named_by_one_stat_and_every_install_renames_it(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    package = copied_code(site)
    install(site, "release 1\n")
    first, looks = identity(site)
    assert looks == ["stat"]  # one look, where a source tree takes one per folder and file
    assert identity(site)[0] == first  # stable between calls
    (package / "commands" / "release.py").write_text("RELEASE = 2\n")
    install(site, "release 2\n")  # an upgrade
    second = identity(site)[0]
    (package / "commands" / "release.py").write_text("RELEASE = 1\n")
    install(site, "release 1\n")  # and back: the same words, but a new install
    third = identity(site)[0]
    assert len({first, second, third}) == 3


def test_a_source_tree_is_named_by_its_files(tmp_path: Path) -> None:
    site = tmp_path / "site"
    package = copied_code(site)
    before, looks = identity(site)
    assert looks.count("scandir") > 10
    (package / "commands" / "release.py").write_text("RELEASE = 2\n")
    assert identity(site)[0] != before
