"""Drive the installed ``resource-gpu`` and ``resource-storage`` binaries the way core does: a
verb, JSON on stdin; or the same command in this process (:func:`in_process`), where the
process boundary is not what a test is about."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from click.testing import CliRunner

from resource_extend.commands import programs
from resource_extend.commands.main import main
from resource_extend.commands.resident.client import HELPER_ENTRY

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin as Kind

MODE = os.environ.get("RESOURCE_GPU_TEST_MODE", "http")
"""How the plugin runs in this test run (the suite runs once in each): calls in-process over
HTTP or over gRPC, or served by the resident helper with the default transport (``auto``: the
helper's scans over many nodes over gRPC, the rest over HTTP, as is a call made before it is
up)."""
if MODE not in ("http", "grpc", "resident"):
    raise RuntimeError(f"RESOURCE_GPU_TEST_MODE={MODE!r}: expected http, grpc or resident")
TRANSPORT: Literal["http", "grpc", "auto"] = (
    "grpc" if MODE == "grpc" else "auto" if MODE == "resident" else "http"
)


def binary(program: str = "resource-gpu") -> list[str]:
    """The script ``pip install`` puts in the venv's ``bin/``: what people run (``nodes``,
    ``doctor``, ``detect``); tests run the real thing."""
    found = shutil.which(program, path=str(Path(sys.executable).parent))
    found = found or shutil.which(program)
    if found is None:
        raise RuntimeError(f"{program} is not installed: pip install -e '.[test]'")
    return [found]


_LAUNCHERS: list[Path] = []
_WRITING = threading.Lock()


def launched(program: str = "resource-gpu") -> list[str]:
    """The launcher ``install`` writes into core's plugin directory: what core runs (Python
    isolated and without ``site``, this tree's code). Written once per test process, into a
    directory of its own that others may read (the access tests call as another user)."""
    with _WRITING:
        if not _LAUNCHERS:
            import atexit
            import tempfile

            directory = Path(tempfile.mkdtemp(prefix="resource-extend-plugins-"))
            directory.chmod(0o755)
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
            _LAUNCHERS.append(directory)
        path = _LAUNCHERS[0] / program
        if not path.exists():
            from resource_extend.commands.launcher import install

            install(programs.programs()[program], str(path.parent), replace=False)
    return [str(path)]


def command_for(program: str, verb: str) -> list[str]:
    """What runs ``verb``, as on a host: core's verbs the launcher, the rest ``bin/``."""
    from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS

    return launched(program) if verb in CORE_VERBS or verb in HIDDEN_VERBS else binary(program)


def copied_code(directory: Path) -> Path:
    """A copy of the product's code in ``directory/resource_extend``: an installation of the
    test's own (run with ``directory`` on ``PYTHONPATH``) that it may change as an upgrade
    would, unseen by every other test's helpers. The package it is copied into."""
    source = Path(programs.__file__).parents[1]  # commands/programs.py's: the code's root
    package = directory / "resource_extend"
    for folder in ("ledger", "projections", "commands"):
        shutil.copytree(
            source / folder, package / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    return package


@dataclass
class Result:
    status: int
    stdout: str
    stderr: str

    @property
    def answer(self) -> Any:
        return json.loads(self.stdout)


def _stdin(request: Any, raw: bytes | None) -> bytes:
    """A call's stdin: ``raw`` as given, else ``request`` as JSON (none: ``{}``)."""
    return raw if raw is not None else json.dumps(request if request is not None else {}).encode()


def in_process(
    kind: Kind, args: list[str], stdin: bytes = b"", env: dict[str, str] | None = None
) -> Result:
    """``kind``'s program run in this process (``commands.main``, as the installed script runs
    it) with ``args``: ``stdin`` given, stdout and stderr caught, and the status it exits with
    (it always ends in ``SystemExit``; any other exception fails the test)."""
    status: object = "no SystemExit"
    with CliRunner().isolation(input=stdin, env=env) as (out, err, _):
        try:
            main(kind, args)
        except SystemExit as exc:
            status = exc.code
        sys.stdout.flush()  # what click wrote itself (a usage error) is still buffered
        sys.stderr.flush()
    assert isinstance(status, int), f"main() ended with {status!r}"
    return Result(status, out.getvalue().decode(), err.getvalue().decode())


class Plugin:
    """One isolated plugin installation: its own config file and etcd key prefix."""

    def __init__(
        self,
        endpoints: list[str],
        workdir: Path,
        *,
        program: str = "resource-gpu",
        scheduler: Any = None,  # {"max_deploy_count": N}; Any: **etcd settings pass beside it
        **etcd: Any,
    ) -> None:
        self.prefix = f"/test-{uuid.uuid4().hex[:12]}"
        self.endpoints = endpoints
        self.workdir = workdir
        self.program = program
        self.scheduler = scheduler
        self.config = workdir / programs.programs()[program].config_file
        self.write_config(**etcd)

    def write_config(self, *, resident: bool | None = None, **etcd: Any) -> None:
        """The config, with ``etcd`` settings over the run's; ``resident`` over its mode's."""
        settings = {
            "machines": self.endpoints,
            "prefix": self.prefix,
            "transport": TRANSPORT,
            **etcd,
        }
        helper = MODE == "resident" if resident is None else resident
        config: dict[str, Any] = {"etcd": settings, "resident": helper}
        if self.scheduler is not None:
            config["scheduler"] = self.scheduler
        # Written aside and renamed in, as an operator's deploy tool would: a call racing this
        # rewrite (the partition tests move a live cluster's endpoints) reads the old file or
        # the new one, never a truncated one.
        staged = self.config.with_name(f".{self.config.name}.{uuid.uuid4().hex}")
        staged.write_text(json.dumps(config))  # JSON is YAML
        os.replace(staged, self.config)

    def run(
        self,
        verb: str,
        request: Any = None,
        *args: str,
        raw: bytes | None = None,
        timeout: float = 60,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Result:
        environment = {k: v for k, v in os.environ.items() if k != "ERU_RESOURCE_CONFIG_PATH"}
        environment.update(self._call_env())
        environment.update(env or {})
        stdin = _stdin(request, raw)
        done = subprocess.run(
            [*command_for(self.program, verb), verb, *args], input=stdin, capture_output=True,
            env=environment, cwd=cwd or self.workdir, timeout=timeout,
        )  # fmt: skip
        return Result(done.returncode, done.stdout.decode(), done.stderr.decode())

    def call(self, verb: str, request: Any = None, *args: str, raw: bytes | None = None) -> Result:
        """:meth:`run`, in this process (:func:`in_process`): the same config, home and
        request, without the process."""
        kind = programs.programs()[self.program]
        return in_process(kind, [verb, *args], _stdin(request, raw), self._call_env())

    def through(
        self, verb: str, request: Any = None, *args: str, raw: bytes | None = None
    ) -> Result:
        """A call as the mode under test makes it: in this process (:meth:`call`) over HTTP or
        gRPC, where what is tested is the verb and not the process; through the binary and the
        resident helper (:meth:`run`) in the resident mode, whose point is that boundary."""
        if MODE == "resident":
            return self.run(verb, request, *args, raw=raw)
        return self.call(verb, request, *args, raw=raw)

    def _call_env(self) -> dict[str, str]:
        """What a call of this installation finds in its environment: the config, and a home
        of the test's own (the default export directory lies under it, so nothing a test
        compacts lands in the home of whoever runs the suite)."""
        return {"ERU_RESOURCE_CONFIG_PATH": str(self.config), "HOME": str(self.workdir / "home")}

    def ok(self, verb: str, request: Any = None, *args: str) -> Any:
        """Run a verb that must succeed: exit 0, nothing on stderr, one JSON value on stdout."""
        result = self.run(verb, request, *args)
        assert result.status == 0, f"{verb} failed: {result.stderr}"
        assert result.stderr == "", f"{verb} wrote to stderr on success: {result.stderr!r}"
        return result.answer

    def fails(self, verb: str, request: Any = None, *, raw: bytes | None = None) -> str:
        """Run a verb that must fail: non-zero exit, nothing on stdout, one line on stderr."""
        return failure_line(self.run(verb, request, raw=raw), verb, self.program)

    def stop_helper(self) -> None:
        """Stop the resident helper serving this installation's config, if one runs, and one
        still starting (a call's fallback may have started it a moment ago)."""
        stop_helpers(self.program, only=str(self.config))
        kill_helpers_of(self.config)

    # Shorthands used across the tests.
    def add(self, node: str, counts: dict[str, int] | None = None) -> Any:
        return self.ok("add-node", {"nodename": node, "resource": R(counts)})

    def info(self, node: str, workloads: list[Any] | None = None) -> Any:
        return self.ok(
            "get-node-resource-info", {"nodename": node, "workloads_resource": workloads}
        )

    def history(self, node: str) -> list[dict[str, Any]]:
        result = self.run("history", None, node, "--json")
        assert result.status == 0, result.stderr
        return json.loads(result.stdout)  # type: ignore[no-any-return]


def stop_helpers(program: str = "resource-gpu", only: str | None = None) -> list[str]:
    """Stop ``program``'s resident helpers of this user's runtime directory
    (``$XDG_RUNTIME_DIR``, which the suite points at a directory of its own): all, or ``only``
    the one serving that config.
    What was done to each, as ``resource-gpu helper --stop`` says it."""
    from resource_extend.commands.resident import client as resident
    from resource_extend.commands.resident import command as helper

    names = helper.sockets(program)
    if only is not None:
        wanted = resident.socket_name(only)
        names = [name for name in names if name == wanted]
    done = []
    for name in names:
        seen = helper.look(program, name)
        try:
            done.append(helper.stop(program, seen))
        finally:
            if seen.link is not None:
                seen.link.close()
    return done


def kill_helpers_for(directory: str | Path) -> list[int]:
    """End every helper process serving a config that lies in ``directory`` or below it,
    listening or not (one started by a call's fallback just as the others were stopped would
    otherwise outlive the test, until its idle timeout). Compared a directory at a time:
    ``/tmp/run-3`` holds none of ``/tmp/run-31``'s helpers."""
    within = Path(directory)
    return _kill_helpers(lambda config: config.is_relative_to(within))


def kill_helpers_of(config: Path) -> list[int]:
    """End every helper process serving exactly ``config``, as :func:`kill_helpers_for`."""
    return _kill_helpers(lambda serving: serving == config)


def _kill_helpers(serves: Callable[[Path], bool]) -> list[int]:
    """SIGTERM, which a helper answers by removing its socket and exiting, then SIGKILL for
    any still there after 2 s."""
    ended = [pid for pid in helper_pids(serves) if _signal(pid, signal.SIGTERM)]
    deadline = time.monotonic() + 2.0
    while (left := set(helper_pids(serves)) & set(ended)) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in left:
        _signal(pid, signal.SIGKILL)
    return ended


STARTING = f"{HELPER_ENTRY} "
"""A helper's command line before it names itself ``resource-gpu helper``: ``python -I -c
<taking the package; HELPER_ENTRY> <kind's module> <config>``."""
TITLES = tuple(f"{name} helper " for name in programs.programs())
"""A helper's title once it runs: ``<program> helper <config>``."""


def helper_config(argv: str) -> str | None:
    """The config path a helper's command line (its arguments joined by spaces) names; None
    when it is not a helper's."""
    for title in TITLES:
        if argv.startswith(title):
            return argv.removeprefix(title)
    _, starting, rest = argv.partition(STARTING)
    if starting:
        _program, _, config = rest.partition(" ")
        return config or None
    return None


def helper_pids(serves: Callable[[Path], bool]) -> list[int]:
    """Live helper processes (zombies aside) serving a config that ``serves`` holds true of."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        config = helper_config(argv.rstrip(" "))
        if config is not None and serves(Path(config)):
            found.append(int(proc.name))
    return found


def _signal(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def failure_line(result: Result, command: str, program: str = "resource-gpu") -> str:
    """The one stderr line of a failed call: non-zero exit, nothing on stdout, the line naming
    the command, no traceback."""
    assert result.status != 0, f"{command} succeeded: {result.stdout!r}"
    assert result.stdout == "", f"{command} printed on failure: {result.stdout!r}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"{command} error is not one line: {result.stderr!r}"
    assert lines[0].startswith(f"{program} {command}: "), lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


def R(counts: dict[str, int] | None) -> dict[str, Any] | None:
    """Core's GPU value shape."""
    return None if counts is None else {"prod_count_map": counts}


def counts(value: Any) -> dict[str, int]:
    """The card map inside an ``R`` answer."""
    return dict(value["prod_count_map"] or {})
