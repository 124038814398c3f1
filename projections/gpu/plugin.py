"""resource-gpu, whole: :data:`PLUGIN`, what the installed script hands the shell."""

from resource_extend.projections.gpu import KIND
from resource_extend.projections.plugin import Plugin

TYPE_CHECKING = False  # not typing's: core's thin calls import this module
if TYPE_CHECKING:
    from resource_extend.projections.parts import Parts


def _parts() -> "Parts":
    from resource_extend.projections.gpu import metrics, views
    from resource_extend.projections.gpu.node import GPU
    from resource_extend.projections.parts import Parts

    return Parts(fold=GPU, view=views, gauges=metrics, metrics=metrics.DESCRIPTIONS)


PLUGIN = Plugin(
    KIND,
    origin=__name__,
    verbs="resource_extend.commands.gpu",
    exporter_port=18464,
    summary="The eru GPU resource plugin: whole cards by product model",
    parts=_parts,
    commands={"detect": "resource_extend.commands.gpu.detect:detect"},
    host_checks={"gpu driver": "resource_extend.commands.gpu.host:check_gpu_host"},
)
"""resource-gpu: the plugin of this kind."""
