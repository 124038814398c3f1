"""``doctor``'s look at this host: the directory compactions write exports to, and the
resident helper (running, which code, its socket's owner and mode). What only a kind needs on
a host is the kind's own (``Plugin.host_checks``: ``commands.gpu.host_checks``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resource_extend.commands.doctor.findings import Finding, fail, ok, warn
from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident import command as helper
from resource_extend.ledger.host import rundir
from resource_extend.ledger.upkeep.export import unsafe_directory

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin
    from resource_extend.ledger.host.config import Config

STOP_FIX = "{prog} helper --stop --all (the next core call starts a fresh helper)"


def check_exports(config: Config) -> list[Finding]:
    """The directory this host's compactions write exports to (``streams.archive_dir``, else
    ``streams.export_dir``): nobody else may change it or any directory above it, or the
    compactions refuse to write there (``ledger.upkeep.export.unsafe_directory``)."""
    if not (directory := config.streams.destination.directory):
        return [ok("exports", "no export directory: streams are not compacted on this host")]
    folder = Path(directory).expanduser().resolve()
    existing = next(place for place in (folder, *folder.parents) if place.exists())
    unsafe = unsafe_directory(existing)
    made = "" if existing == folder else f" (made on the first compaction, in {existing})"
    if unsafe:
        return [
            fail(
                "exports",
                f"compactions cannot write exports to {folder}{made}: {unsafe}",
                "chmod go-w the directory named, or point streams.export_dir (or "
                "streams.archive_dir) at a directory only {prog}'s user can change",
            )
        ]
    return [ok("exports", f"compactions write exports to {folder}{made}")]


def check_launcher(plugin: Plugin, explicit: str | None) -> list[Finding]:
    """What core runs for this program, where it lies beside the config (``{prog}`` in the
    config's directory, core's plugin directory as installs make it): this installation's
    launcher, or a link, another installation's launcher, another file."""
    import sys

    from resource_extend.commands.launcher import read_launcher
    from resource_extend.ledger.host.config import config_path

    check = "launcher"
    directory = os.path.dirname(os.path.abspath(config_path(explicit, plugin.config_file)))
    entry = os.path.join(directory, plugin.name)
    install = f"{os.path.dirname(sys.executable)}/{{prog}} install {directory}"
    if not os.path.lexists(entry):
        return [ok(check, f"no {entry}: core's plugin directory is not the config's")]
    if os.path.islink(entry):
        return [
            warn(
                check,
                f"core runs {entry}, a link to {os.readlink(entry)}: each call starts Python "
                "whole (site and the venv's .pth files), about 2 ms more than a launcher",
                f"{install} (it replaces the link in one rename)",
            )
        ]
    launched = read_launcher(entry)
    if launched is None:
        return [
            warn(
                check,
                f"core runs {entry}, which no install of {{prog}} wrote (upstream's plugin?)",
                f"{install} --replace, to run this installation",
            )
        ]
    python, package = launched
    if (python, package) != (sys.executable, resident.package_dir()):
        return [
            warn(
                check,
                f"core runs {entry}, the launcher of another installation ({python}, the "
                f"code in {package})",
                f"{install}, to run this one; or run doctor from that installation",
            )
        ]
    return [ok(check, f"core runs {entry}: this installation's launcher ({python} -IS)")]


def check_helper(plugin: Plugin, explicit: str | None, config: Config | None) -> list[Finding]:
    """The runtime directory, every socket in it, and the helper for this config."""
    check = "helper"
    try:
        directory, path = rundir.open_private(plugin.name, create=False)
    except rundir.Untrusted as exc:
        return [
            fail(
                check,
                f"the helper's runtime directory cannot be trusted: {exc}",
                "make it yours and private (chmod 700), or point $XDG_RUNTIME_DIR at a "
                "directory that is",
            )
        ]
    except OSError:
        if reason := rundir.unwritable(plugin.name):
            return [_unwritable(reason)]
        wanted = _wanted(plugin, config)
        return [ok(check, f"none running ({wanted}); no runtime directory yet")]
    if reason := rundir.unwritable(plugin.name):
        os.close(directory)
        return [_unwritable(reason)]
    findings: list[Finding] = []
    try:
        names = sorted(name for name in os.listdir(path) if name.endswith(".sock"))
        for name in names:
            findings += _socket_findings(directory, os.path.join(path, name), name)
    finally:
        os.close(directory)
    config_file = resident.config_file(plugin, explicit)
    ours = resident.socket_name(config_file) if config_file else None
    code = resident.code_identity()
    seen = [helper.look(plugin.name, n) for n in names if not _is_failed(findings, n)]
    try:
        found = None
        for one in seen:
            status = one.status
            if one.link is None:
                findings.append(
                    warn(f"{check} {one.name}", "a stale socket: nobody listens", STOP_FIX)
                )
            elif one.name == ours and status is not None:
                found = status
            elif status is not None and status.get("code") != code:
                findings.append(_old_code(one.name, status, code))
        findings.insert(0, _ours(plugin, check, found, config, config_file, code))
    finally:
        for one in seen:
            if one.link is not None:
                one.link.close()
    return findings


def _unwritable(reason: str) -> Finding:
    return fail(
        "helper",
        f"no helper can start: {reason}, so every call starts its own process",
        "make it writable by {prog}'s user (chmod u+w; systemd-logind makes /run/user/UID "
        "for a logged-in user), or point $XDG_RUNTIME_DIR at a directory that is, or turn "
        "the helper off (resident: false)",
    )


def _wanted(plugin: Plugin, config: Config | None) -> str:
    if resident.turned_off(plugin):
        return "${PROG}_RESIDENT turns it off"
    if config is None:
        return "the config is not valid"
    return "the config wants one" if config.resident else "the config says resident: false"


def _ours(
    plugin: Plugin,
    check: str,
    status: dict[str, Any] | None,
    config: Config | None,
    config_file: str | None,
    code: str,
) -> Finding:
    if status is None:
        starts = " (the next core call starts one)" if config and config.resident else ""
        shown = config_file or "this config"
        return ok(check, f"none running for {shown}: {_wanted(plugin, config)}{starts}")
    return ok(
        check,
        f"running for {status.get('config')}: pid {status.get('pid')}, {{prog}} "
        f"{status.get('version')}, code {status.get('code')} (this installation's: {code})",
    )


def _old_code(name: str, status: dict[str, Any], code: str) -> Finding:
    return warn(
        f"helper {name}",
        f"pid {status.get('pid')} serves {status.get('config')} with other code: "
        f"{{prog}} {status.get('version')}, code {status.get('code')}, not this "
        f"installation's {code} (left running by an upgrade; calls no longer reach it, and it "
        "exits when idle)",
        STOP_FIX,
    )


def _is_failed(findings: list[Finding], name: str) -> bool:
    return any(found.check == f"helper {name}" and found.status == "fail" for found in findings)


def _socket_findings(directory: int, path: str, name: str) -> list[Finding]:
    """A socket in the runtime directory: this user's, and writable by nobody else."""
    check = f"helper {name}"
    try:
        found = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return []  # a helper that just exited took it away
    mode = stat.S_IMODE(found.st_mode)
    if not stat.S_ISSOCK(found.st_mode):
        return [warn(check, f"{path} is not a socket", f"remove it: rm {path}")]
    if found.st_uid != os.getuid():
        return [
            fail(
                check,
                f"{path} belongs to uid {found.st_uid}, not this user ({os.getuid()}): "
                "another user's process could answer core's calls",
                f"remove it (rm {path}) and find out who made it",
            )
        ]
    if mode & 0o022:
        return [
            fail(
                check,
                f"{path} is writable by {_who(mode)} (mode {mode:04o}): a helper's socket "
                "is 0600, for this user alone",
                f"{STOP_FIX}; or chmod 600 {path}",
            )
        ]
    return []


def _who(mode: int) -> str:
    return " and ".join(
        who for who, bit in (("its group", 0o020), ("every user", 0o002)) if mode & bit
    )
