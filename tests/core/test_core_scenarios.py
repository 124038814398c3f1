"""Both plugins driven by eru core's own resource layer: cobalt and its binary-plugin client,
compiled unchanged from core's source into ``core-harness`` (``../shared/core-harness``), over
the scenarios in ``scenarios/``, against real etcd, with the resident helper on and off.

The harness loads the installed commands from a plugin dir as core does (named after their
files, run with the plugin dir as working directory), decodes every answer into core's Go
types and judges each step's expectations. Where it is missing the scenarios are skipped,
except where ``RESOURCE_EXTEND_REQUIRE_CORE_HARNESS`` is set (CI sets it): there a missing
harness fails the suite. ``CORE_HARNESS`` names the binary if it lives elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.plugin import TRANSPORT, binary

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCENARIOS = sorted((HERE / "scenarios").glob("*.json"))
REQUIRED = "RESOURCE_EXTEND_REQUIRE_CORE_HARNESS"
RUN_TIMEOUT = 600
PROGRAMS = {"resource-gpu": "gpu.yaml", "resource-storage": "storage.yaml"}


def find_harness() -> Path | None:
    named = os.environ.get("CORE_HARNESS")
    where = Path(named) if named else ROOT.parent / "shared" / "core-harness" / "core-harness"
    return where if where.is_file() and os.access(where, os.X_OK) else None


@pytest.fixture(scope="module")
def harness() -> Path:
    found = find_harness()
    if found is None:
        reason = "core-harness not found (../shared/core-harness/core-harness, or CORE_HARNESS)"
        if os.environ.get(REQUIRED):
            pytest.fail(f"{reason}, and {REQUIRED} is set")
        pytest.skip(reason)
    return found


def plugin_dir(where: Path, endpoints: list[str], *, resident: bool) -> Path:
    """A plugin dir as an operator installs one: the two commands (the launchers each
    program's ``install`` writes) and, beside them, their configs, on a key prefix of this
    test's own."""
    where.mkdir(mode=0o755)
    prefix = f"/core-{uuid.uuid4().hex[:12]}"
    for program, config in PROGRAMS.items():
        subprocess.run(
            [*binary(program), "install", str(where)], check=True, capture_output=True, timeout=60
        )
        settings: dict[str, Any] = {
            "etcd": {"machines": endpoints, "prefix": prefix, "transport": TRANSPORT},
            "resident": resident,
        }
        if program == "resource-storage":
            settings["scheduler"] = {"max_deploy_count": 100}
        (where / config).write_text(json.dumps(settings))
    return where


def load(scenario: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(scenario.read_text())
    return loaded


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_every_step_holds_an_expectation_or_says_why(scenario: Path) -> None:
    """A step the harness judges "-" proves nothing: each one either expects something or
    carries a note saying why it is there."""
    steps = load(scenario)["steps"]
    assert steps
    bare = [s.get("name") or s["call"] for s in steps if not s.get("expect") and not s.get("note")]
    assert bare == [], f"steps without an expectation or a note: {bare}"


def saved_names(step: dict[str, Any]) -> list[str]:
    """The workload names a step saves (a Concurrent step's worker i saves its own)."""
    if step["call"] in ("Concurrent", "Repeat"):
        inner, count = step["args"]["step"], step["args"]["count"]
        return [n.replace("{i}", str(i)) for i in range(count) for n in saved_names(inner)]
    return list(step["args"].get("save_as") or [])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_no_workload_name_is_saved_twice(scenario: Path) -> None:
    """The harness keeps workloads by name: a second Alloc saving a name replaces the first
    one's record, and the usage checks then compare against the wrong workloads."""
    names = [name for step in load(scenario)["steps"] for name in saved_names(step)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("resident", [False, True], ids=["in-process", "helper"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_core_scenario(
    harness: Path, etcd_endpoints: list[str], tmp_path: Path, scenario: Path, resident: bool
) -> None:
    plugins = plugin_dir(tmp_path / "plugins", etcd_endpoints, resident=resident)
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    env.pop("ERU_RESOURCE_CONFIG_PATH", None)  # each plugin reads the config beside it
    done = subprocess.run(
        [str(harness), "-plugin-dir", str(plugins), "-out", str(out), str(scenario)],
        capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT, cwd=tmp_path,
    )  # fmt: skip
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    failed = [
        f"step {r['i']} {r.get('name') or r['call']}: {r.get('mismatches')} "
        f"(error: {r.get('error')}; logs: {[e.get('msg') for e in r.get('logs') or []][:4]})"
        for r in records
        if r.get("verdict") == "FAIL"
    ]
    assert done.returncode == 0, "\n".join(failed) or done.stderr[-4000:]
    summary = records[-1]["summary"]
    assert summary["fail"] == 0, failed
    steps = load(scenario)["steps"]
    assert summary["steps"] == len(steps)
    assert summary["pass"] == sum(1 for s in steps if s.get("expect"))
