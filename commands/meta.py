"""Verbs that need neither etcd nor a config file."""

from __future__ import annotations

from msgspec import Struct

from resource_extend.commands.protocol import Session, verb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from resource_extend.projections.metrics import MetricDescription


@verb()
def name(session: Session[Struct]) -> str:
    """Print the plugin's name, "gpu" or "storage", as upstream and resource-extend do. Core
    names a plugin after its file, so this is informational."""
    return session.plugin.kind


@verb()
def verbs(session: Session[Struct]) -> list[str]:
    """Print the JSON array of the verbs offered to core (asked once at load)."""
    from resource_extend.commands.registry import CORE_VERBS

    return list(CORE_VERBS)


@verb()
def get_metrics_description(session: Session[Struct]) -> list[MetricDescription]:
    """Describe the gauges get-metrics emits (resource-gpu: gpu_capacity and gpu_used, per
    product; resource-storage: storage_capacity and storage_used)."""
    return list(session.plugin.parts.metrics)


@verb()
def calculate_remap(session: Session[Struct]) -> dict[str, None]:
    """Not offered (cards and volumes are never re-pinned); answers an older core with no
    remap."""
    return {"engine_params_map": None}
