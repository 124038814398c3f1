"""What a helper loads before it serves, so that its call processes, forked from it, load
nothing: every verb and what it uses, every Struct's layout, the config and the etcd transport
it names. Run by the helper's process, once, before it forks its first call process."""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import types
from typing import TYPE_CHECKING

import msgspec

from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS, load_verb
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.host import config as config_files
from resource_extend.ledger.model.errors import PluginError

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin
    from resource_extend.ledger.host.config import Config


def warm_up(plugin: Plugin) -> None:
    """Import every verb and what it uses now, not on a client's time: what a Session imports
    only when a call needs it too (a call's process would import it, and forget it, each
    time)."""
    importlib.import_module("resource_extend.ledger.host.copies")  # Session.config
    importlib.import_module("resource_extend.ledger.upkeep.bounds")  # Session.append
    for package in _kinds_packages(plugin):  # what its verbs import only when they need it
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
    for name in (*CORE_VERBS, *HIDDEN_VERBS):
        verb = load_verb(plugin, name)
        if verb is not None and verb.request_type is not None:
            # A request bound to its kind (``AddNode[Resource]``) keeps its layout on itself,
            # not on a class _lay_out_structs finds: laid out here, not in every call.
            msgspec.json.Decoder(verb.request_type)
    plugin.parts  # noqa: B018 (loads the kind's fold, views and gauges)

    _lay_out_structs()


def config_or_none(config_path: str) -> Config | None:
    """The config, if it loads (if not, the call itself says what is wrong, word for word,
    in-process)."""
    try:
        return config_files.load(config_path)
    except PluginError:
        return None


def ready_for_calls(config_path: str) -> None:
    """Parse the config, and load the etcd transports it names, for scans and the rest (gRPC's
    libraries are many): once here, rather than in every call's process. Their failures are
    the calls' to say."""
    settings = config_or_none(config_path)
    if settings is not None:
        for scan in (False, True):  # opens nothing: a transport connects on first use
            with contextlib.suppress(PluginError):
                open_transport(settings.etcd, scan=scan)


def _kinds_packages(plugin: Plugin) -> list[types.ModuleType]:
    """The kind's two folders: its pure half's (the package of its fold) and its shell's (the
    package of its verbs, beside its value)."""
    found = []
    for name in (type(plugin.parts.fold).__module__, plugin.verbs):
        module = importlib.import_module(name)
        if not hasattr(module, "__path__"):  # a module: its folder is its package
            module = importlib.import_module(name.rpartition(".")[0])
        found.append(module)
    return found


def _lay_out_structs() -> None:
    """Have msgspec work out every Struct type loaded (annotations resolved, fields laid out,
    kept on the class): done lazily, by the first decode, it would cost each call's process
    about a millisecond."""
    pending: list[type] = [msgspec.Struct]
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if kind is not msgspec.Struct:
            msgspec.json.Decoder(kind)
