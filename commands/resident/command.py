"""``resource-gpu helper``: see and stop the resident helper that serves core's calls."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime, timezone
from typing import Any

import click

from resource_extend.commands.resident import client as resident
from resource_extend.commands.under_click import click_config, click_plugin
from resource_extend.ledger.host import rundir

NOT_RUNNING = 3
"""Exit status when no helper runs (as ``systemctl status`` has it)."""
STOP_WAIT = 60.0
"""Seconds ``--stop`` waits for calls in flight to finish and the helper to exit."""


class Seen:
    """One socket in the runtime directory, and what its helper said of itself."""

    def __init__(self, name: str, link: resident.Link | None, status: dict[str, Any] | None):
        self.name = name
        self.link = link
        self.status = status

    @property
    def state(self) -> str:
        if self.link is None:
            return "stale"  # nobody listens: a helper that was killed
        return "running" if self.status is not None else "not answering"


def ask(link: resident.Link, request: bytes) -> dict[str, Any] | None:
    """Send a control request (``status``, ``stop``); the helper's answer, or None."""
    try:
        link.sock.settimeout(resident.SILENCE)
        link.sock.sendall(resident.MAGIC + b"\0" + request + b"\n")
        frame = link.reader.line()
        if frame is None or not frame.startswith(b"S "):
            return None
        body = link.reader.exactly(int(frame[2:]))
        return json.loads(body) if body is not None else None
    except (OSError, ValueError):
        return None


def look(program: str, name: str) -> Seen:
    """The socket ``name`` of ``program``'s helpers, and what its helper says."""
    link = resident.Link.connect(program, name)
    return Seen(name, link, ask(link, b"status") if link else None)


def sockets(program: str) -> list[str]:
    """Every helper socket of ``program`` and this user, whatever its installation or config."""
    try:
        directory, path = rundir.open_private(program, create=False)
    except OSError:
        return []
    os.close(directory)
    return sorted(name for name in os.listdir(path) if name.endswith(".sock"))


def stop(program: str, seen: Seen) -> str:
    """Stop a helper (calls in flight finish first), kill one that does not answer, remove a
    stale socket; says what was done."""
    if seen.link is None:
        removed = remove_stale(program, seen.name)
        return "removed a stale socket" if removed else "left alone (in use)"
    pid = seen.link.pid
    again = resident.Link.connect(program, seen.name)  # one request per connection
    if seen.status is None or again is None or ask(again, b"stop") is None:
        return (
            f"killed (pid {pid}): it did not answer"
            if seen.link.kill()
            else f"pid {pid} would not stop"
        )
    again.close()
    if seen.link.gone(STOP_WAIT):
        return f"stopped (pid {pid})"
    return f"asked to stop; still finishing its calls (pid {pid})"


def remove_stale(program: str, name: str) -> bool:
    """Remove a socket nobody listens on, under the lock helpers hold to claim one."""
    from resource_extend.commands.resident.claim import answers, locked

    directory, _ = rundir.open_private(program, create=False)
    try:
        with locked(directory) as held:
            if held and not answers(directory, name):
                with contextlib.suppress(FileNotFoundError):  # it may have just gone itself
                    os.unlink(name, dir_fd=directory)
                return True
    finally:
        os.close(directory)
    return False


def describe(program: str, seen: Seen) -> list[str]:
    status = seen.status
    if status is None:
        return [f"{seen.name}: {seen.state}"]
    started = datetime.fromtimestamp(status["started"], timezone.utc)
    return [
        f"helper {status['config']}: {'stopping' if status['stopping'] else 'running'}",
        f"  pid       {status['pid']}",
        f"  version   {program} {status['version']} (code {status['code']}, "
        f"Python {status['python']})",
        f"  config    {status['config']}",
        f"  socket    {status['socket']}",
        f"  started   {started.isoformat(timespec='seconds').replace('+00:00', 'Z')} "
        f"(up {_duration(status['uptime_s'])})",
        f"  calls     {_calls(status)}",
    ]


def _calls(status: dict[str, Any]) -> str:
    if status["calls_served"] is None:  # its own process did not answer the call's
        return "not counted: the helper's own process did not answer (stopped?)"
    return f"{status['calls_served']} served, {status['calls_in_flight']} in flight"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


@click.command("helper")
@click.option("--stop", "stopping", is_flag=True, help="Stop it (calls in flight finish first).")
@click.option(
    "--all", "every", is_flag=True, help="Every helper of this program and user, any config."
)
@click.option("--json", "as_json", is_flag=True, help="Print the helpers' status as JSON.")
def helper(stopping: bool, every: bool, as_json: bool) -> None:
    """Show the resident helper that serves core's calls for this config, or stop it.

    \b
    The helper is a warm process that the first call for a config file starts (detached,
    in its own session); later calls hand it their request over a Unix socket in
    $XDG_RUNTIME_DIR/{prog}-UID (or /tmp/{prog}-UID), private to this user.
    It exits after 10 idle minutes, on SIGTERM, or when the config says resident: false.
    Shows: pid, version, config, socket, start time and uptime, calls served and in flight.

    \b
    Exit status: 0 when a helper runs (or was stopped), 3 when none runs.
      {prog} --config /etc/eru/plugins/{config} helper
      {prog} helper --all --stop   stop every {prog} helper of this user
    """
    plugin = click_plugin()
    program = plugin.name
    config = resident.config_file(plugin, click_config())
    names = sockets(program)
    if not every:
        names = [n for n in names if config is not None and n == resident.socket_name(config)]
    none = "no helper is running" + (
        "" if every else f" for {config or click_config() or plugin.config_file}"
    )
    seen = [look(program, name) for name in names]
    try:
        if stopping:
            lines = [f"{s.name}: {stop(program, s)}" for s in seen]
            click.echo("\n".join(lines) or none)
            return
        if as_json:
            click.echo(json.dumps([s.status or {"socket": s.name, "state": s.state} for s in seen]))
        else:
            blocks = ["\n".join(describe(program, s)) for s in seen]
            click.echo("\n\n".join(blocks) or none)
        if not any(s.status is not None for s in seen):
            raise SystemExit(NOT_RUNNING)
    finally:
        for s in seen:
            if s.link is not None:
                s.link.close()
