"""resource-gpu, whole: :data:`PLUGIN`, what the installed script hands the shell.

Assembled here, in the shell, from the kind's pure half (``projections.gpu``: its name, and
its parts) and its own (its verbs beside this module, its exporter port and help), so that the
pure half knows nothing of the shell. Cheap to import: core's thin calls do."""

from resource_extend.commands.program import Plugin
from resource_extend.projections.gpu import KIND

TYPE_CHECKING = False  # not typing's: core's thin calls import this module
if TYPE_CHECKING:
    from resource_extend.projections.parts import Parts


def parts() -> "Parts":
    """The kind's parts (``projections.gpu.parts``), imported when first asked for: a call
    the resident helper answers never asks."""
    from resource_extend.projections.gpu.parts import parts

    return parts()


PLUGIN = Plugin(
    KIND,
    origin=__name__,
    verbs="resource_extend.commands.gpu",
    exporter_port=18464,
    summary="The eru GPU resource plugin: whole cards by product model",
    parts=parts,
    commands={"detect": "resource_extend.commands.gpu.detect:detect"},
    host_checks={"gpu driver": "resource_extend.commands.gpu.host_checks:check_gpu_host"},
)
"""resource-gpu: the plugin of this kind."""
