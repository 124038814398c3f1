"""The order ``doctor``'s checks run in, and the first of them: the config.

Each check is a small function that returns findings (``etcd``, ``prefix``, ``host``). One
that raises becomes a ``fail`` of its own and the rest still run. A check that needs what an
earlier one could not give (a valid config; an etcd endpoint that answers) is reported as a
``warn`` saying "not checked" and why: the failure that stopped it is listed above it, so
fixing failures from the top clears the rest.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from resource_extend.commands.doctor import etcd, prefix, this_host
from resource_extend.commands.doctor.findings import Finding, fail, guarded, not_checked, ok, warn
from resource_extend.commands.registry import resolve
from resource_extend.ledger.etcd.choice import described
from resource_extend.ledger.host import config as config_files
from resource_extend.ledger.host.config import Config
from resource_extend.ledger.model.counts import plural
from resource_extend.ledger.model.errors import PluginError

if TYPE_CHECKING:
    from collections.abc import Callable

    from resource_extend.commands.program import Plugin

CONFIG_CHECK = "config"


def check_config(plugin: Plugin, explicit: str | None) -> tuple[Config | None, Finding]:
    """The config file: found, readable and valid; the config, when it is."""
    path = config_files.config_path(explicit, plugin.config_file)
    how = "--config" if explicit else f"${config_files.ENV_VAR}"
    if not explicit and not os.environ.get(config_files.ENV_VAR):
        how = "the default, in the working directory"
    try:
        config = config_files.load(explicit, default=plugin.config_file)
    except PluginError as exc:
        return None, fail(
            CONFIG_CHECK,
            f"{exc.reason} (path from {how})",
            f"pass --config PATH or set ${config_files.ENV_VAR} to the plugin's config "
            "file; if that is the file, correct what the message names",
        )
    machines = len(config.etcd.machines)
    summary = (
        f"{path} (from {how}) is valid: prefix {config.etcd.prefix}, "
        f"{plural(machines, 'etcd endpoint')}, "
        f"{described(config.etcd.transport, resident=config.resident)}"
    )
    if config.unrecognised:
        strays = ", ".join(config.unrecognised)
        return config, warn(
            CONFIG_CHECK,
            f"{summary}; it also holds {strays}, neither this plugin's key nor core's: ignored",
            "if it is a typo, correct it (every key is in '{prog} sample-config'); if a newer "
            "core reads it, leave it",
        )
    return config, ok(CONFIG_CHECK, summary)


def every_finding(plugin: Plugin, explicit: str | None) -> list[Finding]:
    """Every check, in order: config, etcd (each endpoint, alarms, clock), the prefix, the
    export directory, what core runs (the launcher), the resident helper, and the kind's own
    (``Plugin.host_checks``: resource-gpu's GPU driver and container runtime)."""
    config, found = check_config(plugin, explicit)
    findings = [found]
    if config is None:
        checks = ("etcd", "prefix", "exports")
        findings += [not_checked(check, "no valid config") for check in checks]
    else:
        probed = etcd.EtcdFindings()
        findings += guarded(plugin, "etcd", lambda: etcd.check_etcd(plugin, config, probed))
        if probed.reachable:
            findings += guarded(plugin, "prefix", lambda: prefix.check_prefix(plugin, explicit))
        else:
            findings.append(not_checked("prefix", "no etcd endpoint passed its check"))
        findings += guarded(plugin, "exports", lambda: this_host.check_exports(config))
    findings += guarded(plugin, "launcher", lambda: this_host.check_launcher(plugin, explicit))
    findings += guarded(plugin, "helper", lambda: this_host.check_helper(plugin, explicit, config))
    for check, target in plugin.host_checks.items():  # what only this kind needs on a host
        findings += guarded(plugin, check, functools.partial(_own_check, plugin, target))
    return findings


def _own_check(plugin: Plugin, target: str) -> list[Finding]:
    """The kind's own check ``target`` (``module:function``) run on this host."""
    check: Callable[[Plugin], list[Finding]] = resolve(target)
    return check(plugin)
