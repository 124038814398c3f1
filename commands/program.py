"""A plugin program, whole, and what the shell says of any of them.

:class:`Plugin` is the one value that says everything the shell serves of a kind. Each kind's
shell assembles its own (``commands/<kind>/plugin.py``) from the kind's pure half (its name, its
parts) and its own (its verbs, its help); the shell passes it on (a core verb's ``Session``, the
CLI's context). The installed script hands ``commands.main`` the little of it a core call needs
before the resident helper answers, a :class:`Program` (its kind and names, and where its
``Plugin`` is), and the call loads the rest only when it goes on in its own process. Nothing
looks a kind up by name, and nothing keeps a "current" one: the list of this install's programs
is ``commands.programs``, above every kind's folder. Cheap to import: the thin client of every
core call reads it, and a kind's heavy parts (its fold, its views, its gauges) load on first use
(:attr:`Plugin.parts`).
"""

TYPE_CHECKING = False  # not typing's: the thin client of every core call imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from resource_extend.projections.parts import Parts

DISTRIBUTION = "resource-extend"
"""The package pip installs, with both commands."""
VERSION = "0.8.0"
"""This release (pyproject.toml reads it from here: the one place it is written)."""
MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The largest request a verb reads from stdin (anything longer is refused)."""


class Program:
    """A plugin program as core runs it: its kind and the names that derive from it, and the
    module that defines its whole value (:class:`Plugin`). All a core call needs until the
    resident helper has answered it, so that the installed script (``run(Program(...))``) makes
    the call without importing the kind: only a call that goes on in its own process loads
    its :class:`Plugin` (:meth:`plugin`)."""

    __slots__ = ("config_file", "kind", "name", "origin")

    def __init__(self, kind: str, *, origin: str, name: str | None = None) -> None:
        if name is None:  # (a launcher written by 0.8.0 or before names only the kind)
            from resource_extend.ledger.model.kinds import program_of

            name = program_of(kind)
        self.kind = kind
        """The resource kind, the one name the others derive from, and the key segment
        ``<prefix>/resource/<kind>/``: ``gpu``."""
        self.name = name
        """The command, as core runs it and as every error line begins: ``resource-gpu``
        (``ledger.model.kinds.program_of`` of the kind: a launcher writes it out, so that a
        core call loads no module to derive it)."""
        self.config_file = f"{kind}.yaml"
        """The config file read when neither ``--config`` nor the environment names one."""
        self.origin = origin
        """The module that defines the program's value as ``PLUGIN``: how a call that goes on
        in its own process, and the resident helper's process, find it."""

    @property
    def env_prefix(self) -> str:
        """What this program's environment variables begin with: ``RESOURCE_GPU``."""
        return self.name.upper().replace("-", "_")

    def env(self, suffix: str) -> str:
        """This program's environment variable: ``RESOURCE_GPU_<SUFFIX>``."""
        return f"{self.env_prefix}_{suffix}"

    def plugin(self) -> "Plugin":
        """The program's whole value, ``PLUGIN`` of :attr:`origin` (imported now); a
        ``SystemExit`` saying so when that is not this program's."""
        import importlib

        try:
            found = getattr(importlib.import_module(self.origin), "PLUGIN", None)
        except ModuleNotFoundError as missing:  # the module itself, not one it imports
            if not f"{self.origin}.".startswith(f"{missing.name}."):
                raise
            found = None
        ours = (self.kind, self.name, self.origin)
        if not isinstance(found, Plugin) or (found.kind, found.name, found.origin) != ours:
            raise SystemExit(
                f"{self.name}: {self.origin} defines no PLUGIN of kind {self.kind!r} "
                f"named {self.name}"
            )
        return found

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Plugin(Program):
    """A resource kind as one of the plugin programs: its names, its help, where its commands
    live, and its parts. Everything the shell serves differently for a kind is here, so that a
    new kind is a new folder and nothing else (docs/ledger.md, "Adding a kind")."""

    __slots__ = (
        "_load",
        "_parts",
        "commands",
        "exporter_port",
        "host_checks",
        "summary",
        "verbs",
    )

    def __init__(
        self,
        kind: str,
        *,
        origin: str,
        verbs: str,
        exporter_port: int,
        summary: str,
        parts: "Callable[[], Parts]",
        commands: "Mapping[str, str] | None" = None,
        host_checks: "Mapping[str, str] | None" = None,
    ) -> None:
        super().__init__(kind, origin=origin)
        self.verbs = verbs
        """The package of its core verbs, in the shell; each is where the shell's registry says
        (``.writes:add_node``)."""
        self.exporter_port = exporter_port
        """The exporter's default port: one for each program, so both serve on one host."""
        self.summary = summary
        """The first line of ``--help``."""
        self.commands: Mapping[str, str] = commands or {}
        """Operators' commands only this program has, by name: ``module:function``
        (resource-gpu's ``detect``)."""
        self.host_checks: Mapping[str, str] = host_checks or {}
        """doctor's checks of what only this kind needs on a host, by the check's name:
        ``module:function(plugin) -> findings``."""
        self._load = parts
        self._parts: Parts | None = None

    @property
    def parts(self) -> "Parts":
        """The kind's fold, views and gauges (imported on first use)."""
        if self._parts is None:
            self._parts = self._load()
        return self._parts

    def plugin(self) -> "Plugin":
        """Itself: the whole value is here already."""
        return self

    def own_words(self, text: str) -> str:
        """``text`` (help written once for every program) with ``{prog}``, ``{PROG}`` (its
        environment variables' prefix, ``RESOURCE_GPU``), ``{kind}``, ``{config}`` and
        ``{port}`` made this program's; anything else in braces is left as it is."""
        return (
            text.replace("{prog}", self.name)
            .replace("{PROG}", self.env_prefix)
            .replace("{kind}", self.kind)
            .replace("{config}", self.config_file)
            .replace("{port}", str(self.exporter_port))
        )


def installed_version() -> str:
    """This install's version (``--version``, the exporter's build_info)."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def debugging(program: Program) -> bool:
    """``RESOURCE_GPU_DEBUG`` is set: tracebacks and gRPC's own logs reach stderr."""
    from resource_extend.ledger.host.lean import getenv

    return bool(getenv(program.env("DEBUG")))
