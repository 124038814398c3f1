"""Which plugin of the pair this process is: ``resource-gpu`` or ``resource-storage``.

Both commands are one command tree over one ledger; what differs is a handful of names (the
program, its resource kind, its config file) and the modules that implement its core verbs.
The script that starts the process chooses (:func:`use`); everything else asks
:func:`current`. Imports nothing: the thin client of every core call reads it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the thin client of every core call imports this module
if TYPE_CHECKING:
    from typing import Any

DISTRIBUTION = "resource-extend"
"""The package pip installs, with both commands."""


def installed_version() -> str:
    """This install's version (``--version``, the exporter's build_info)."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class Program:
    """One plugin: its names, and where its verbs live."""

    __slots__ = ("config_file", "exporter_port", "kind", "name", "summary", "verbs")

    def __init__(
        self, name: str, kind: str, config_file: str, exporter_port: int, summary: str
    ) -> None:
        self.name = name
        """The command, as core runs it and as every error line begins: ``resource-gpu``."""
        self.kind = kind
        """The resource kind, the key segment ``<prefix>/resource/<kind>/``: ``gpu``."""
        self.config_file = config_file
        """The config file read when neither ``--config`` nor the environment names one."""
        self.exporter_port = exporter_port
        """The exporter's default port: one for each program, so both serve on one host."""
        self.summary = summary
        self.verbs = f"resource_extend.commands.{kind}"
        """The package of its core verbs' implementations (``writes``, ``queries``)."""

    def package(self) -> Any:
        """The package of its core verbs (``commands.gpu``), which says what its kind is."""
        import importlib

        return importlib.import_module(self.verbs)

    def env(self, suffix: str) -> str:
        """This program's environment variable: ``RESOURCE_GPU_<SUFFIX>``."""
        return f"{self.name.upper().replace('-', '_')}_{suffix}"

    def debugging(self) -> bool:
        """``RESOURCE_GPU_DEBUG`` is set: tracebacks and gRPC's own logs reach stderr."""
        import os

        return bool(os.environ.get(self.env("DEBUG")))

    def fill(self, text: str) -> str:
        """``text`` (help written once for both programs) with ``{prog}``, ``{kind}``,
        ``{config}`` and ``{port}`` made this program's; anything else in braces is left as
        it is."""
        return (
            text.replace("{prog}", self.name)
            .replace("{kind}", self.kind)
            .replace("{config}", self.config_file)
            .replace("{port}", str(self.exporter_port))
        )

    def __repr__(self) -> str:
        return f"Program({self.name!r})"


GPU = Program(
    "resource-gpu",
    "gpu",
    "gpu.yaml",
    18464,
    "The eru GPU resource plugin: whole cards by product model",
)
STORAGE = Program(
    "resource-storage",
    "storage",
    "storage.yaml",
    18465,
    "The eru storage resource plugin: volumes, disk IOPS/BPS quotas and storage space",
)
PROGRAMS = {program.name: program for program in (GPU, STORAGE)}

_current = GPU


def use(name: str) -> Program:
    """Make this process the plugin called ``name`` (a KeyError for another name)."""
    global _current
    _current = PROGRAMS[name]
    return _current


def current() -> Program:
    return _current


class using:
    """``with using("resource-storage"):`` this process is that program for a while (tests,
    and tools that serve both)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._before = _current

    def __enter__(self) -> Program:
        self._before = _current
        return use(self._name)

    def __exit__(self, *exc: object) -> None:
        global _current
        _current = self._before
