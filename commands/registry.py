"""Every subcommand, by name, and where it lives: each module is imported only when its
subcommand runs, so a verb loads only what it needs."""

TYPE_CHECKING = False  # not typing's: core's thin calls import this module, and typing costs ms
if TYPE_CHECKING:
    from typing import Any

    import click

    from resource_extend.commands.program import Plugin
    from resource_extend.commands.protocol import Verb

CORE_VERBS: dict[str, str] = {
    "add-node": ".writes:add_node",
    "remove-node": ".writes:remove_node",
    "set-node-resource-capacity": ".writes:set_node_resource_capacity",
    "set-node-resource-usage": ".writes:set_node_resource_usage",
    "set-node-resource-info": ".writes:set_node_resource_info",
    "fix-node-resource": ".writes:fix_node_resource",
    "calculate-deploy": ".queries:calculate_deploy",
    "calculate-realloc": ".queries:calculate_realloc",
    "get-nodes-deploy-capacity": ".queries:get_nodes_deploy_capacity",
    "get-node-resource-info": ".queries:get_node_resource_info",
    "get-nodes-resource-info": ".queries:get_nodes_resource_info",
    "get-most-idle-node": ".queries:get_most_idle_node",
    "get-metrics-description": "resource_extend.commands.meta:get_metrics_description",
    "get-metrics": ".queries:get_metrics",
    "name": "resource_extend.commands.meta:name",
    "verbs": "resource_extend.commands.meta:verbs",
}
"""The verbs offered to core (the answer of ``verbs``), each written once for every program: a
target starting with ``.`` is in the package of the program's core verbs (``Plugin.verbs``:
``commands.gpu``, ``commands.storage``), which implements every one of them."""

HIDDEN_VERBS: dict[str, str] = {
    # Not offered (nothing is ever re-pinned), but an older core may still call it.
    "calculate-remap": "resource_extend.commands.meta:calculate_remap",
}

OFFLINE_VERBS = frozenset({"name", "verbs", "get-metrics-description", "calculate-remap"})
"""Verbs that need neither etcd nor a config file: they never start a resident helper."""

AUDITOR_COMMANDS: dict[str, str] = {
    "nodes": "resource_extend.commands.audit.nodes:nodes",
    "history": "resource_extend.commands.audit.history:history",
    "show": "resource_extend.commands.audit.state:show",
    "verify": "resource_extend.commands.audit.verify:verify",
    "export": "resource_extend.commands.audit.history:export",
    "compact": "resource_extend.commands.audit.compact:compact",
    "archive": "resource_extend.commands.audit.archive:archive",
    "migrate": "resource_extend.commands.audit.migrate:migrate",
    "footprint": "resource_extend.commands.audit.footprint:footprint",
}
"""Commands for auditors: a node's history and state, and the streams' upkeep."""

OPERATOR_COMMANDS: dict[str, str] = {
    "doctor": "resource_extend.commands.doctor.command:doctor",
    "helper": "resource_extend.commands.resident.command:helper",
    "exporter": "resource_extend.commands.exporter.command:exporter",
    "sample-config": "resource_extend.commands.sample_config:sample_config",
    "install": "resource_extend.commands.launcher:install_command",
}
"""Commands for operators: the host's set-up, the resident helper, metrics, samples."""

COMMANDS = {**CORE_VERBS, **HIDDEN_VERBS, **AUDITOR_COMMANDS, **OPERATOR_COMMANDS}


def operator_commands(plugin: "Plugin") -> dict[str, str]:
    """The operators' commands ``plugin``'s program offers: the shared ones, then its own
    (``Plugin.commands``: resource-gpu's ``detect``)."""
    return {**OPERATOR_COMMANDS, **plugin.commands}


def people_commands(plugin: "Plugin") -> dict[str, str]:
    """The commands for people ``plugin``'s program offers: the auditors', then the
    operators'."""
    return {**AUDITOR_COMMANDS, **operator_commands(plugin)}


def load(plugin: "Plugin", name: str) -> "Verb | click.Command | None":
    """The subcommand called ``name`` (a core verb or a click command) of ``plugin``'s program,
    or None when the program has none of that name."""
    target = COMMANDS.get(name) or plugin.commands.get(name)
    if target is None:
        return None
    found = resolve(plugin.verbs + target if target.startswith(".") else target)
    named = getattr(found, "named", None)  # a core verb: named here, and only here
    loaded: Verb | click.Command | None = found if named is None else named(name)
    return loaded


def load_verb(plugin: "Plugin", name: str) -> "Verb | None":
    """The core verb ``name`` of ``plugin``'s program, or None when it has none of that name."""
    from resource_extend.commands.protocol import Verb

    loaded = load(plugin, name)
    return loaded if isinstance(loaded, Verb) else None


def resolve(target: str) -> "Any":
    """What ``module:attribute`` names (None when the module lacks it), its module imported."""
    import importlib

    module, attribute = target.split(":")
    return getattr(importlib.import_module(module), attribute, None)
