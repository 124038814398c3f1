"""The programs this install serves, the one list of them: for what serves every program (the
manual, which names them all) and for the tests. It sits above every kind's folder, which none
of them imports: a kind's shell knows only its own value (``commands/<kind>/plugin.py``)."""

TYPE_CHECKING = False  # not typing's: --help imports this module
if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin


def programs() -> "dict[str, Plugin]":
    """Both programs, by name (``resource-gpu``: ``commands.gpu.plugin.PLUGIN``)."""
    from resource_extend.commands.gpu.plugin import PLUGIN as GPU
    from resource_extend.commands.storage.plugin import PLUGIN as STORAGE

    return {plugin.name: plugin for plugin in (GPU, STORAGE)}
