"""``doctor``'s look at a GPU host (``Plugin.host_checks``): the NVIDIA driver and the
container runtime.

The Docker daemon's config is read from ``/etc/docker/daemon.json``, or the file
``$RESOURCE_GPU_DOCKER_DAEMON_JSON`` names; the docker CLI is never run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

from resource_extend.commands.doctor.findings import Finding, fail, ok, warn

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

DAEMON_JSON = "/etc/docker/daemon.json"
NVIDIA_SMI_SECONDS = 15.0
"""How long nvidia-smi may take to answer (a hung driver never does)."""
RUNTIME_TOOLS = ("nvidia-container-runtime", "nvidia-ctk")
RUNTIME_FIX = (
    "install the NVIDIA Container Toolkit if it is missing, then: nvidia-ctk runtime configure "
    "--runtime=docker; systemctl restart docker"
)


def check_gpu_host(plugin: Plugin) -> list[Finding]:
    """The NVIDIA driver (``nvidia-smi`` answers), then the container runtime; a host with no
    ``nvidia-smi`` is not a GPU host, and has nothing to check."""
    check = "gpu driver"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [ok(check, "not a GPU host: no nvidia-smi on PATH")]
    answered = _run_smi(smi)
    if isinstance(answered, str):
        return [
            fail(
                check,
                f"{smi} failed: {answered}",
                "load or install the NVIDIA driver until nvidia-smi lists the GPUs (after a "
                "driver upgrade: reboot; see dmesg | grep -i nvidia)",
            )
        ]
    cards = [line.split(",") for line in answered if line.strip()]
    drivers = sorted({card[-1].strip() for card in cards})
    names = sorted({card[0].strip() for card in cards})
    found = ok(
        check,
        f"nvidia-smi answers: {len(cards)} GPUs ({', '.join(names) or 'none'}), driver "
        f"{', '.join(drivers) or 'unknown'}",
    )
    tools = [tool for tool in RUNTIME_TOOLS if shutil.which(tool)]
    path = os.environ.get(plugin.env("DOCKER_DAEMON_JSON")) or DAEMON_JSON
    text, unreadable = _read_text(path)
    return [found, container_runtime(tools, path, text, unreadable)]


def _run_smi(smi: str) -> list[str] | str:
    """nvidia-smi's lines (one a GPU: ``name, driver``), or why it failed."""
    query = [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        done = subprocess.run(
            query, capture_output=True, timeout=NVIDIA_SMI_SECONDS, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {NVIDIA_SMI_SECONDS:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    output = (done.stdout + done.stderr).decode(errors="replace")
    if done.returncode != 0:
        first = next((line.strip() for line in output.splitlines() if line.strip()), "")
        return f"exit status {done.returncode}: {first or 'no output'}"
    return done.stdout.decode(errors="replace").splitlines()


def _read_text(path: str) -> tuple[str | None, str]:
    """The file's text (None when it does not exist), or why it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read(1024 * 1024), ""
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, exc.strerror or str(exc)


def container_runtime(
    tools: list[str], path: str, text: str | None, unreadable: str = ""
) -> Finding:
    """Pure: the NVIDIA container runtime, from the tools on PATH and Docker's daemon.json."""
    check = "nvidia container runtime"
    if not tools:
        return warn(
            check,
            f"neither {' nor '.join(RUNTIME_TOOLS)} is on PATH: containers get no GPUs",
            RUNTIME_FIX,
        )
    if unreadable:
        return warn(
            check,
            f"cannot read {path}: {unreadable}",
            "run doctor as a user who may read it (or point ${PROG}_DOCKER_DAEMON_JSON at a copy)",
        )
    if text is None:
        return warn(check, f"{path} does not exist: Docker has no nvidia runtime", RUNTIME_FIX)
    try:
        daemon = json.loads(text)
    except ValueError as exc:
        return fail(
            check,
            f"{path} is not valid JSON ({exc}): Docker will not start with it",
            f"correct it (python3 -m json.tool {path} shows where), then {RUNTIME_FIX}",
        )
    runtimes = daemon.get("runtimes") if isinstance(daemon, dict) else None
    if not isinstance(runtimes, dict) or "nvidia" not in runtimes:
        return warn(check, f'{path} registers no "nvidia" runtime', RUNTIME_FIX)
    default = daemon.get("default-runtime") == "nvidia"
    return ok(
        check,
        f"{', '.join(tools)} on PATH; {path} registers the nvidia runtime"
        f"{' (the default)' if default else ''}",
    )
