"""``doctor``'s findings, and the order its checks run in.

Each check is a small function that returns findings (``doctor_etcd``, ``doctor_prefix``,
``doctor_host``). One that raises becomes a ``fail`` of its own and the rest still run. A
check that needs what an earlier one could not give (a valid config; an etcd endpoint that
answers) is reported as a ``warn`` saying "not checked" and why: the failure that stopped it
is listed above it, so fixing failures from the top clears the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import msgspec

from resource_extend.commands.program import current
from resource_extend.ledger.errors import PluginError
from resource_extend.ledger.words import plural

if TYPE_CHECKING:
    from resource_extend.ledger.config import Config

Status = Literal["ok", "warn", "fail"]
CONFIG_CHECK = "config"


class Finding(msgspec.Struct, frozen=True):
    """One thing doctor looked at: how it stands, what it saw, and what to do about it."""

    check: str
    status: Status
    message: str
    fix: str = ""
    """What to run or change; empty when the finding is ok."""


def ok(check: str, message: str) -> Finding:
    return Finding(check, "ok", message)


def warn(check: str, message: str, fix: str) -> Finding:
    return Finding(check, "warn", message, current().fill(fix))


def fail(check: str, message: str, fix: str) -> Finding:
    return Finding(check, "fail", message, current().fill(fix))


def not_checked(check: str, because: str) -> Finding:
    return warn(check, f"not checked: {because}", "fix the failure listed above, then run again")


def guarded(check: str, run: Callable[[], list[Finding]]) -> list[Finding]:
    """``run``'s findings; a failure it raises is a finding too, so the next check runs."""
    try:
        return run()
    except PluginError as exc:
        reason = exc.reason
    except Exception as exc:  # a bug in a check must not hide the other findings
        if current().debugging():
            raise
        reason = f"internal error: {type(exc).__name__}: {exc}"
    debug = current().env("DEBUG")
    return [fail(check, f"the check itself failed: {reason}", f"{debug}=1 shows its traceback")]


def check_config(explicit: str | None) -> tuple[Config | None, Finding]:
    """The config file: found, readable and valid; the config, when it is."""
    import os

    from resource_extend.ledger import config as config_files

    program = current()
    path = config_files.config_path(explicit, program.config_file)
    how = "--config" if explicit else f"${config_files.ENV_VAR}"
    if not explicit and not os.environ.get(config_files.ENV_VAR):
        how = "the default, in the working directory"
    try:
        config = config_files.load(explicit, default=program.config_file)
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
        f"{plural(machines, 'etcd endpoint')}, transport {config.etcd.transport}"
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


def every_finding(explicit: str | None) -> list[Finding]:
    """Every check, in order: config, etcd (each endpoint, alarms, clock), the prefix, the
    export directory, the resident helper, and (resource-gpu only) the GPU driver and the
    container runtime."""
    from resource_extend.commands import doctor_etcd, doctor_host, doctor_prefix

    config, found = check_config(explicit)
    findings = [found]
    if config is None:
        checks = ("etcd", "prefix", "exports")
        findings += [not_checked(check, "no valid config") for check in checks]
    else:
        probed = doctor_etcd.EtcdFindings()
        findings += guarded("etcd", lambda: doctor_etcd.check_etcd(config, probed))
        if probed.reachable:
            findings += guarded("prefix", lambda: doctor_prefix.check_prefix(explicit))
        else:
            findings.append(not_checked("prefix", "no etcd endpoint passed its check"))
        findings += guarded("exports", lambda: doctor_host.check_exports(config))
    findings += guarded("helper", lambda: doctor_host.check_helper(explicit, config))
    if current().kind == "gpu":
        findings += guarded("gpu driver", doctor_host.check_gpu_host)
    return findings
