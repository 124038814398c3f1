"""``doctor``: what is wrong with this host's set-up, each finding with how to fix it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.doctor.checks import every_finding
from resource_extend.commands.protocol import Answer, Session, respond
from resource_extend.commands.under_click import answered, click_config
from resource_extend.ledger.model.errors import PluginError

if TYPE_CHECKING:
    from resource_extend.commands.doctor.findings import Finding


@click.command("doctor")
@click.option(
    "--json",
    "as_json_output",
    is_flag=True,
    help='Print [{"check", "status", "message", "fix"}, ...] instead of a table.',
)
@answered
def doctor(session: Session[Struct], as_json_output: bool) -> Answer:
    """Check this host's set-up, one finding per line: ok, warn or fail, what was seen, and
    under each warn or fail the fix.

    \b
    config            the config file: found (--config, else $ERU_RESOURCE_CONFIG_PATH, else
                      ./{config}) and valid
    etcd HOST:PORT    each etcd.machines endpoint on its own: reachable, TLS with
                      etcd.ca/cert/key, etcd.auth's credentials accepted, etcd 3.4 or
                      later, the prefix readable
    etcd alarms       none raised (NOSPACE: etcd refuses every write, core's included)
    clock             this host's clock against the Date of etcd's answers: warn past 1 s,
                      fail past 60 s (or streams.min_age less core's 30 s, when less)
    upstream records  records the upstream plugin wrote that no write adopted yet (a warn)
    0.1 streams       streams still in release 0.1's layout (see migrate)
    drift             heads that disagree with their streams, as verify --all finds them
    event times       each node's newest event against this host's clock: fail when one is
                      stamped more than 60 s ahead (a writer's clock is ahead)
    launcher          what core runs, beside the config: this installation's launcher
                      ("{prog} install"), not a link (2 ms a call slower), another
                      installation's launcher or another program
    helper            the resident helper: running for this config with this
                      installation's code; each helper socket of this user's is its own
                      and writable by nobody else
    gpu driver        (resource-gpu) nvidia-smi answers; no nvidia-smi: not a GPU host
    nvidia container runtime
                      (resource-gpu, on a GPU host) nvidia-container-runtime or nvidia-ctk
                      on PATH, and /etc/docker/daemon.json (or the file named by
                      $RESOURCE_GPU_DOCKER_DAEMON_JSON) registering an "nvidia" runtime

    A check that cannot run because one before it failed (no valid config, no etcd endpoint
    answering) is a warn saying "not checked": fix the failures from the top. One failing
    check never stops the others.

    Cost: the prefix is listed as "{prog} nodes" lists it (one paged read of the node
    records, one of the stream keys); drift is checked on at most 50 nodes (a random 50 when
    there are more) whose streams hold at most 2,000 events; event times on the newest event
    of at most 1,000 nodes, read in batches. Nothing is written; nvidia-smi
    is the only program run (the docker CLI never is).

    \b
    Exit status: 0 when nothing fails (warnings allowed), 1 when a check fails.
      {prog} doctor
      {prog} --config /etc/eru/plugins/{config} doctor --json
    """

    plugin = session.plugin
    findings = [found.filled(plugin) for found in every_finding(plugin, click_config())]
    answer = _as_json(findings) if as_json_output else table(findings)
    failed = [found.check for found in findings if found.status == "fail"]
    if not failed:
        return answer
    respond(answer, text=True, io=session.io)

    shown = ", ".join(dict.fromkeys(failed))
    raise PluginError(f"{len(failed)} of {len(findings)} checks failed: {shown}")


def _as_json(findings: list[Finding]) -> str:
    return msgspec.json.encode(findings).decode()


def table(findings: list[Finding]) -> str:
    """STATUS CHECK MESSAGE, aligned; under each finding that is not ok, its fix."""
    rows = [("STATUS", "CHECK", "MESSAGE")]
    rows += [(found.status, found.check, found.message) for found in findings]
    status_width = max(len(row[0]) for row in rows)
    check_width = max(len(row[1]) for row in rows)
    indent = " " * (status_width + check_width + 4)
    lines = []
    for index, (status, check, message) in enumerate(rows):
        lines.append(f"{status:<{status_width}}  {check:<{check_width}}  {message}".rstrip())
        found = findings[index - 1] if index else None
        if found is not None and found.status != "ok" and found.fix:
            lines.append(f"{indent}fix: {found.fix}")
    return "\n".join(lines)
