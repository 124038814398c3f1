"""The ``resource-gpu`` and ``resource-storage`` commands.

Core runs ``resource-gpu [--config PATH] VERB`` once per request, so that path is kept short:
the call goes to the resident helper (``commands.resident.client``) when one is up, and otherwise
straight to the verb, without loading the click CLI (about 15 ms of imports). Anything else
(``--help``, the auditor and operator commands, a usage error) goes through ``commands.cli``.
Started by a launcher (``commands.launcher``), Python has not run ``site`` yet: it runs only
once the call goes on in this process (:func:`going_on_here`). Until then this module and the
thin client import nothing but ``posix``, ``sys`` and ``_socket`` of the standard library.
"""

import posix
import sys

from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS, OFFLINE_VERBS, load_verb

TYPE_CHECKING = False  # not typing's: every core call runs this module
if TYPE_CHECKING:
    from typing import NoReturn

    from resource_extend.commands.program import Plugin, Program


def run(program: "Program") -> "NoReturn":
    """The installed script's whole work: :func:`main`, then the exit, without the
    interpreter's tear-down (about 1.5 ms of every core call, in a process that leaves nothing
    to clean up: its answer is flushed here, and the kernel closes its sockets)."""
    try:
        main(program)
        code: object = 0
    except SystemExit as done:
        code = done.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # as Python says SystemExit("why"): on stderr, status 1
        sys.stderr.write(f"{code}\n")
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # nobody reads what is left; Python's own exit says 120
        code = code or 120
    posix._exit(code)


def main(program: "Program", argv: list[str] | None = None) -> None:
    """Run ``program`` (the one the installed script is) with ``argv``; it ends in
    ``SystemExit``. Its whole value (``Plugin``) is loaded only once no helper has answered."""
    args = sys.argv[1:] if argv is None else argv
    config, rest = _config_option(args)
    if len(rest) == 1 and (rest[0] in CORE_VERBS or rest[0] in HIDDEN_VERBS):
        verb = rest[0]
        from resource_extend.commands.resident import client as resident

        outcome = resident.call(program, verb, config)
        if outcome.status is not None:
            raise SystemExit(outcome.status)
        plugin = going_on_here(program)
        from resource_extend.commands.protocol import Session

        handler = load_verb(plugin, verb)
        if handler is not None:  # else a verb this kind lacks: the CLI says so
            handler(Session(plugin, config, resume=outcome.resume))  # a failure exits
            if verb not in OFFLINE_VERBS:  # a call that worked: its config and etcd are sound
                resident.start_if_wanted(plugin, config)
            raise SystemExit(0)
    plugin = going_on_here(program)
    from resource_extend.commands.cli import main as run_cli

    run_cli(plugin, args)


def going_on_here(program: "Program") -> "Plugin":
    """The call goes on in this process, no helper having answered it. Python's start is
    finished: a launcher (``commands.launcher``) starts it without ``site``, which a call the
    helper answers never needs, and one that goes on here does (the venv's packages, msgspec
    and click, and its ``.pth`` files; isolated, ``site`` still adds no user site directory).
    msgspec is loaded as it would be without typing_extensions (:func:`_load_msgspec`), gRPC is
    told how much to log, and the program's whole value is loaded (its ``Plugin``)."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()
    _load_msgspec()
    import os

    from resource_extend.commands.program import debugging

    if debugging(program):
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    else:  # stderr carries one error line or nothing; the store's errors say all of it
        os.environ["GRPC_VERBOSITY"] = "NONE"
    return program.plugin()


def _load_msgspec() -> None:
    """Import msgspec as an install without ``typing_extensions`` has it, a setup msgspec
    supports (the module is not among its requirements). msgspec imports it whenever it is
    installed, and grpcio, a dependency, installs it: about 8 ms of a call in a process of its
    own (docs/speed.md), for what only TypedDicts' ``Required`` fields need, which no message
    of the plugin's has. The module is hidden only while msgspec loads (a ``None`` entry in
    ``sys.modules`` fails its import, as Python's import system documents); gRPC, when this
    process loads it, imports the module afterwards as usual."""
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec  # noqa: F401
    finally:
        if sys.modules.get("typing_extensions", sys) is None:
            del sys.modules["typing_extensions"]


def _config_option(args: list[str]) -> tuple[str | None, list[str]]:
    """``--config PATH`` (or ``--config=PATH``) ahead of the verb or after it, and the rest:
    core's ``VERB`` alone, or anything else for the CLI."""
    if len(args) >= 2 and args[0] == "--config":
        return args[1], args[2:]
    if args and args[0].startswith("--config="):
        return args[0].removeprefix("--config="), args[1:]
    if len(args) == 3 and args[1] == "--config":
        return args[2], args[:1]
    if len(args) == 2 and args[1].startswith("--config="):
        return args[1].removeprefix("--config="), args[:1]
    return None, args
