"""The two plugin programs, by name, and what the shell says of any of them.

The installed script hands its kind's :class:`~resource_extend.projections.plugin.Plugin` to
``commands.main``, and the shell passes it on (a core verb's ``Session``, the CLI's context);
:func:`programs` is for what serves both: the resident helper's process, which is told the
program's name, and the tests. Cheap to import: the thin client of every core call reads it.
"""

TYPE_CHECKING = False  # not typing's: the thin client of every core call imports this module
if TYPE_CHECKING:
    from resource_extend.projections.plugin import Plugin

DISTRIBUTION = "resource-extend"
"""The package pip installs, with both commands."""
VERSION = "0.8.0"
"""This release (pyproject.toml reads it from here: the one place it is written)."""
MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The largest request a verb reads from stdin (anything longer is refused)."""


def programs() -> "dict[str, Plugin]":
    """Both programs, by name (``resource-gpu``: ``commands.gpu.plugin.PLUGIN``)."""
    from resource_extend.commands.gpu.plugin import PLUGIN as GPU
    from resource_extend.commands.storage.plugin import PLUGIN as STORAGE

    return {plugin.name: plugin for plugin in (GPU, STORAGE)}


def installed_version() -> str:
    """This install's version (``--version``, the exporter's build_info)."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def debugging(plugin: "Plugin") -> bool:
    """``RESOURCE_GPU_DEBUG`` is set: tracebacks and gRPC's own logs reach stderr."""
    from resource_extend.ledger.lean import getenv

    return bool(getenv(plugin.env("DEBUG")))
