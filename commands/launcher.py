"""``install``: the file core runs, written into its plugin directory.

Core runs ``<resource_plugin.dir>/resource-gpu`` once per call. The script pip puts in a venv's
``bin/`` starts Python whole: ``site`` and every ``.pth`` file of the venv, about 2 ms of each
call, paid for nothing when the resident helper answers. A wheel cannot ask for a leaner start:
pip writes a script's first line itself and drops any flag in it (other installers keep them),
so the start would differ from host to host. ``install`` writes the file core runs instead: a
launcher whose first line is this installation's Python with ``-IS`` (isolated, no ``site``),
and which imports this installation's code by its absolute path. ``commands.main`` loads
``site`` only once no helper has answered.

Isolated, a call runs this installation's code whatever ``PYTHONPATH``, ``PYTHONHOME``, the
user's site directory or the working directory say. The launcher is checked (it must answer
``name``) before it is renamed over what was there, so a call finds the old file or the new,
never neither and never a broken one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import click

from resource_extend.commands.program import DISTRIBUTION, VERSION
from resource_extend.commands.resident.client import package_dir, taken_from
from resource_extend.commands.under_click import click_plugin
from resource_extend.ledger.host.files import read_small_file, write_whole
from resource_extend.ledger.upkeep.export import unsafe_directory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

MARK = f"# written by {DISTRIBUTION}'s install command"
"""The launcher's second line begins so: what ``install`` may replace without ``--replace``."""
TEXT_BUSY_TRIES = 20
"""Tries to run the launcher just written while the kernel says it is still open for writing."""
SHEBANG_MAX = 127
"""The longest first line every Linux reads whole (before 5.1 the kernel cut it at 127 bytes)."""


class Refused(click.ClickException):
    """``install`` will not write: one line saying why (``resource-gpu install: <why>``, as
    every command says its failures), nothing changed."""


def launcher(plugin: Plugin, python: str, package: str) -> str:
    """The launcher of ``plugin``'s program: ``python`` started isolated and without ``site``,
    the package ``resource_extend`` taken from ``package`` and nowhere else."""
    return (
        f"#!{python} -IS\n"
        f"{MARK} ({VERSION}): {plugin.name} as core runs it.\n"
        "# Python starts isolated (-I) and without site (-S); the code is the one installation's\n"
        f'# below. Write it again with "{plugin.name} install DIRECTORY"; do not edit it.\n'
        f"{taken_from(package)}"
        f"{runs(plugin)}"
    )


def runs(plugin: Plugin) -> str:
    """The lines that run ``plugin``'s program, the end of its launcher and of the script pip
    installs (``scripts/resource-gpu``): :func:`commands.main.run` of its ``Program``, its
    names and where its ``Plugin`` is, so that a call the helper answers imports no module of
    the kind."""
    return (
        "from resource_extend.commands.main import run\n"
        "from resource_extend.commands.program import Program\n"
        f"run(Program({plugin.kind!r}, name={plugin.name!r}, origin={plugin.origin!r}))\n"
    )


LAUNCHER_MAX = 64 * 1024
"""Bytes a launcher ``install`` wrote is within, by far: anything larger is something else."""


def read_launcher(path: str) -> tuple[str, str] | None:
    """The Python and the package a launcher at ``path`` runs; None when it is no launcher
    ``install`` wrote (a link to one is read through, a FIFO or a device never opened)."""
    import ast

    try:  # read without blocking: core's plugin directory may hold a FIFO or a device
        lines = read_small_file(path, LAUNCHER_MAX).decode().splitlines()
        first = lines[0].removeprefix("#!").rsplit(" ", 1)[0]
        taken = next(line for line in lines if line.startswith("package.__path__ = "))
        [package] = ast.literal_eval(taken.removeprefix("package.__path__ = "))
    except (OSError, UnicodeDecodeError, IndexError, StopIteration, ValueError, SyntaxError):
        return None
    if len(lines) < 2 or not lines[1].startswith(MARK) or not isinstance(package, str):
        return None
    return first, package


def checked_python(python: str) -> str:
    """``python`` as a launcher's first line can name it, or ``Refused``."""
    if not (os.path.isabs(python) and os.path.isfile(python) and os.access(python, os.X_OK)):
        raise Refused(f"this Python ({python!r}) is not an absolute path to an executable")
    if any(character.isspace() for character in python):
        raise Refused(f"this Python's path ({python!r}) has a space: a first line cannot name it")
    if len(f"#!{python} -IS".encode()) > SHEBANG_MAX:
        raise Refused(
            f"this Python's path is longer than a first line may be ({SHEBANG_MAX} bytes): "
            "make the venv at a shorter path"
        )
    return python


def ours(path: str) -> bool:
    """Whether ``path`` may be replaced without ``--replace``: a link (``ln -s``, as installs
    before this command did), or a launcher this command wrote."""
    return os.path.islink(path) or read_launcher(path) is not None


def install(plugin: Plugin, directory: str, *, replace: bool) -> str:
    """Write ``plugin``'s launcher as ``directory/<program>`` in one rename, once it has
    answered; its path.

    The launcher is staged, made executable and run in a private directory inside
    ``directory`` (core loads the executable files of its plugin directory, dot files
    included, but none in a directory below it), so however the run ends, core never finds a
    second plugin there: SIGTERM, SIGHUP and SIGINT end it as an error, which removes the
    staging directory; a SIGKILL leaves it behind, hidden from core, and no later run needs
    its name."""
    if not os.path.isdir(directory):
        raise Refused(f"{directory} is not a directory (core's resource_plugin.dir)")
    if unsafe := unsafe_directory(Path(directory).resolve()):
        raise Refused(f"{unsafe}: anyone who can write there could replace what core runs")
    target = os.path.join(os.path.abspath(directory), plugin.name)
    if os.path.lexists(target) and not replace and not ours(target):
        raise Refused(
            f"{target} is a file this command did not write (upstream's binary?): "
            "move it aside, or give --replace"
        )
    text = launcher(plugin, checked_python(sys.executable), package_dir())

    def runs(staged: str) -> None:
        os.chmod(staged, 0o755)  # whatever the umask
        answer(staged, plugin)

    _sweep_executable_temporaries(directory, plugin.name)
    with _signals_as_errors():
        try:
            staging = tempfile.mkdtemp(prefix=f".{plugin.name}.install-", dir=directory)
            try:
                write_whole(
                    target, text.encode(), mode=0o700, check=runs, stage_in=staging, links=True
                )
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        except OSError as exc:
            raise Refused(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def _sweep_executable_temporaries(directory: str, program: str) -> None:
    """Remove what releases up to 0.9 staged beside the launcher (``.<program>.<pid>.tmp``) and
    a killed run left there: core would load it as a plugin of its own. This release stages
    in a directory core does not look into."""
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            stale = name.startswith(f".{program}.") and name.endswith(".tmp")
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


class Stopped(Exception):
    """A signal asked ``install`` to stop: raised where it was, so that what it staged goes."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _signals_as_errors() -> Iterator[None]:
    """SIGTERM, SIGHUP and SIGINT raise :class:`Stopped` meanwhile, so that the ``finally``
    blocks run before the process ends (killed by default, it would leave what it staged)."""

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may catch signals (a test calling in a thread, say)
        return
    caught = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    before = {signum: signal.signal(signum, stop) for signum in caught}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def answer(path: str, plugin: Plugin) -> None:
    """Run the launcher at ``path`` once (``name``, which needs neither etcd nor a config);
    ``Refused`` unless it answers as ``plugin``'s program does (its kind: ``"gpu"``)."""
    for attempt in range(TEXT_BUSY_TRIES):
        try:
            done = subprocess.run(
                [path, "name"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30
            )
            break
        except OSError as exc:
            # Text file busy: a process forked elsewhere in this one while the file was open
            # for writing still holds it, until it execs (its copy closes on exec).
            if exc.errno != errno.ETXTBSY or attempt == TEXT_BUSY_TRIES - 1:
                raise Refused(f"the launcher did not run: {exc}") from None
            time.sleep(0.01 * (attempt + 1))
        except subprocess.TimeoutExpired as exc:
            raise Refused(f"the launcher did not run: {exc}") from None
    if done.returncode != 0 or done.stdout != f'"{plugin.kind}"\n'.encode():
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        raise Refused(f"the launcher did not answer: {said[-1] if said else done.returncode}")


@click.command("install")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a file there that this command did not write (upstream's binary, say).",
)
def install_command(directory: str, replace: bool) -> None:
    """Write the command core runs into its plugin directory: DIRECTORY/{prog}, a launcher
    that starts this installation's Python isolated and without site (-IS). A call the
    resident helper answers then loads nothing else: about 2 ms less than the venv's
    bin/{prog} on every call. Isolated, a call runs this installation's code whatever
    PYTHONPATH, PYTHONHOME, the user's site directory or the working directory say.

    The launcher is run once, then renamed over what was there: a call finds the old file or
    the new, never neither. It replaces a link, or a launcher it wrote; anything else only
    with --replace. Run it again from another installation to switch to it (an upgrade, or
    back).

    \b
      /opt/resource-extend/bin/{prog} install /etc/eru/plugins    # core's resource_plugin.dir
    """
    said = f"{click_plugin().name} install"
    try:
        target = install(click_plugin(), directory, replace=replace)
    except Refused as refused:
        click.echo(f"{said}: {refused.message}", err=True)
        sys.exit(refused.exit_code)
    except Stopped as stopped:
        click.echo(f"{said}: stopped by {stopped}", err=True)
        sys.exit(128 + stopped.signum)
    click.echo(f"{target}: runs {sys.executable} -IS with the code in {package_dir()}")
