"""``resource-gpu detect``, the installed command, against a stand-in ``nvidia-smi`` on PATH that
prints what the real one does (its documented CSV, ``-L``, its failures), then its answer
given to ``add-node`` against the suite's real etcd."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from resource_extend.commands.gpu import detect as shell
from resource_extend.projections.gpu.detect import DetectError
from tests.plugin import Plugin, R, Result, binary, failure_line

QUERY = "--query-gpu=index,name,uuid,mig.mode.current --format=csv,noheader"
A100 = "NVIDIA A100-SXM4-40GB"
DRIVER_FAILED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running."
)

MIXED_HOST = {
    QUERY: (
        "0, NVIDIA GeForce RTX 3090, GPU-0a0a, [N/A]\n"
        "1, NVIDIA GeForce RTX 3090, GPU-1b1b, [N/A]\n"
        "2, NVIDIA GeForce RTX 3070, GPU-2c2c, [N/A]\n"
        "3, Tesla V100-SXM2-16GB, GPU-3d3d, [N/A]\n"
    )
}
MIG_HOST = {
    QUERY: f"0, {A100}, GPU-aaaa, Enabled\n1, {A100}, GPU-bbbb, Disabled\n",
    "-L": (
        f"GPU 0: {A100} (UUID: GPU-aaaa)\n"
        "  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
        "  MIG 2g.10gb     Device  1: (UUID: MIG-d7e5a2f0-53f5-6ef4-a2d8-56e82d98fc40)\n"
        "  MIG 2g.10gb     Device  2: (UUID: MIG-e8f6b3a1-64a6-7fa5-b3e9-67f93ea9ad51)\n"
        f"GPU 1: {A100} (UUID: GPU-bbbb)\n"
    ),
}
MIG_3G = "nvidia-a100-sxm4-40gb-mig-3g.20gb"
MIG_COUNTS = {"nvidia-a100-sxm4-40gb": 1, "nvidia-a100-sxm4-40gb-mig-2g.10gb": 2, MIG_3G: 1}

STAND_IN = """#!{python}
import json, sys, time
args = " ".join(sys.argv[1:])
with open({log!r}, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
script = json.load(open({script!r}))
out, err, status, pause = script.get(args, ["", "Invalid combination of input arguments.\\n", 2, 0])
time.sleep(pause)
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(status)
"""


class Host:
    """A directory holding a stand-in ``nvidia-smi``, what it answers to each command line,
    and the command lines it was run with."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.script = root / "nvidia-smi.json"
        self.log = root / "nvidia-smi.log"
        self.blocker = root / "no-pynvml"  # on PYTHONPATH: "import pynvml" fails, whatever
        self.blocker.mkdir()  # the machine has installed
        (self.blocker / "pynvml.py").write_text("raise ImportError('not in this test')\n")

    def answers(self, outputs: dict[str, Any], status: int = 0) -> None:
        """``outputs``: command line -> stdout, or (stdout, stderr, status[, pause])."""
        script = {}
        for args, said in outputs.items():
            out, err, code, pause = (said, "", status, 0) if isinstance(said, str) else said
            script[args] = [out, err, code, pause]
        self.script.write_text(json.dumps(script))
        stand_in = self.bin / "nvidia-smi"
        stand_in.write_text(
            STAND_IN.format(python=sys.executable, log=str(self.log), script=str(self.script))
        )
        stand_in.chmod(0o755)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def env(self) -> dict[str, str]:
        """Only the stand-in on PATH (never a real nvidia-smi); no config named."""
        return {"PATH": str(self.bin), "HOME": str(self.root), "PYTHONPATH": str(self.blocker)}

    def detect(
        self,
        *args: str,
        config: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Result:
        """``resource-gpu [--config CONFIG] detect ARGS``, run in ``cwd`` (default: the host's
        directory) with ``env`` added to :meth:`env`."""
        named = ["--config", config] if config else []
        done = subprocess.run(
            [*binary(), *named, "detect", *args], env={**self.env(), **(env or {})},
            cwd=cwd or self.root, capture_output=True, timeout=60,
        )  # fmt: skip
        return Result(done.returncode, done.stdout.decode(), done.stderr.decode())

    def detected(self, *args: str, env: dict[str, str] | None = None) -> Any:
        result = self.detect(*args, env=env)
        assert result.status == 0, result.stderr
        assert result.stderr == ""
        return result.answer


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path / "host")


def test_several_models(host: Host) -> None:
    host.answers(MIXED_HOST)
    assert host.detected() == {
        "prod_count_map": {"nvidia-3070": 1, "nvidia-3090": 2, "nvidia-v100-sxm2-16gb": 1}
    }
    # run directly, with exactly the documented query; -L only when a card is in MIG mode
    assert host.calls() == [QUERY.split()]


def test_mig_on_and_off(host: Host) -> None:
    host.answers(MIG_HOST)
    assert host.detected() == {"prod_count_map": MIG_COUNTS}
    assert host.calls() == [QUERY.split(), ["-L"]]


def test_no_nvidia_smi_is_no_gpu(host: Host) -> None:
    assert host.detected() == {}  # PATH holds nothing
    result = host.detect("--explain")
    assert result.stdout == "read with: nothing: no nvidia-smi on PATH\nanswer: {}\n"


def test_a_driver_that_sees_no_gpu_is_no_gpu(host: Host) -> None:
    host.answers({QUERY: "No devices were found\n"}, status=6)
    assert host.detected() == {}


def test_a_failing_driver_is_one_line(host: Host) -> None:
    host.answers({QUERY: f"{DRIVER_FAILED}\n\n"}, status=9)
    line = failure_line(host.detect(), "detect")
    assert (
        line
        == f"resource-gpu detect: the NVIDIA driver failed (nvidia-smi exit 9): {DRIVER_FAILED}"
    )


def test_a_failing_listing_of_mig_instances_is_one_line(host: Host) -> None:
    host.answers({QUERY: MIG_HOST[QUERY], "-L": (f"{DRIVER_FAILED}\n", "", 9, 0)})
    assert DRIVER_FAILED in failure_line(host.detect(), "detect")


def test_any_other_failure_is_one_line_with_its_message(host: Host) -> None:
    host.answers({QUERY: ("", "Insufficient Permissions\n\n", 4, 0)})
    line = failure_line(host.detect(), "detect")
    assert line.endswith("failed (exit 4): Insufficient Permissions"), line


def test_output_it_cannot_read_is_one_line(host: Host) -> None:
    host.answers({QUERY: "0, NVIDIA GeForce RTX 3090, GPU-0a0a, [N/A]\n<html>oops</html>\n"})
    line = failure_line(host.detect(), "detect")
    assert "nvidia-smi query line 2 is not index,name,uuid,mig.mode.current" in line


def test_explain_names_each_card_and_instance(host: Host) -> None:
    host.answers(MIG_HOST)
    result = host.detect("--explain")
    assert result.status == 0, result.stderr
    assert result.stdout == (
        f"read with: {host.bin / 'nvidia-smi'}\n"
        "GPU  REPORTED NAME                      PRODUCT\n"
        "0    NVIDIA A100-SXM4-40GB              none: MIG mode, its instances count\n"
        "0    NVIDIA A100-SXM4-40GB MIG 3g.20gb  nvidia-a100-sxm4-40gb-mig-3g.20gb\n"
        "0    NVIDIA A100-SXM4-40GB MIG 2g.10gb  nvidia-a100-sxm4-40gb-mig-2g.10gb\n"
        "0    NVIDIA A100-SXM4-40GB MIG 2g.10gb  nvidia-a100-sxm4-40gb-mig-2g.10gb\n"
        "1    NVIDIA A100-SXM4-40GB              nvidia-a100-sxm4-40gb\n"
        f"answer: {json.dumps({'prod_count_map': MIG_COUNTS}, separators=(',', ':'))}\n"
    )


ETCD = {"etcd": {"machines": ["http://127.0.0.1:1"]}}


def test_products_in_the_config_found_in_the_working_directory(host: Host) -> None:
    host.answers(MIXED_HOST)
    products = {"NVIDIA GeForce RTX 3090": "rtx-3090-24g", "Tesla V100-SXM2-16GB": "v100"}
    (host.root / "gpu.yaml").write_text(json.dumps({**ETCD, "products": products}))
    assert host.detected() == {"prod_count_map": {"nvidia-3070": 1, "rtx-3090-24g": 2, "v100": 1}}


def test_an_invalid_config_is_one_line_a_named_one_must_exist(host: Host) -> None:
    host.answers(MIXED_HOST)
    bad = host.root / "bad.yaml"
    bad.write_text(json.dumps({**ETCD, "products": {"Tesla T4": ""}}))
    assert "which is not a product name" in failure_line(host.detect(config=str(bad)), "detect")
    (host.root / "gpu.yaml").write_text("etcd: [")
    assert "is not valid YAML" in failure_line(host.detect(), "detect")
    missing = str(host.root / "missing.yaml")
    for result in (
        host.detect(config=missing),
        host.detect(cwd=host.bin, env={"ERU_RESOURCE_CONFIG_PATH": missing}),
    ):
        assert "missing.yaml' not found" in failure_line(result, "detect")


def test_nvml_comes_first_where_its_binding_is_installed(host: Host) -> None:
    """The real command with a stand-in ``pynvml`` importable: auto reads NVML, not
    nvidia-smi; --source nvidia-smi reads nvidia-smi."""
    host.answers(MIXED_HOST)
    binding = host.root / "pynvml-here"
    binding.mkdir()
    (binding / "pynvml.py").write_text(FAKE_BINDING)
    nvml = host.detected(env={"PYTHONPATH": str(binding)})
    assert nvml == {"prod_count_map": {"nvidia-h100-80gb-hbm3": 2}}
    assert host.calls() == []
    smi = host.detected("--source", "nvidia-smi", env={"PYTHONPATH": str(binding)})
    assert smi["prod_count_map"]["nvidia-3090"] == 2


FAKE_BINDING = """
class NVMLError(Exception):
    value = 0
NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_FOUND = 12, 3, 6
NVML_DEVICE_MIG_ENABLE = 1
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(index): return index
def nvmlDeviceGetName(handle): return "NVIDIA H100 80GB HBM3"
def nvmlDeviceGetUUID(handle): return "GPU-%d" % handle
def nvmlDeviceGetMigMode(handle): return [0, 0]
"""


def test_a_hung_nvidia_smi_is_stopped_and_reported(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same runner as the command's, in-process, with a short timeout."""
    host.answers({QUERY: ("", "", 0, 30)})
    monkeypatch.setattr(shell, "TIMEOUT", 0.5)
    with pytest.raises(DetectError, match=r"did not answer within 0.5 s"):
        shell.nvidia_smi(str(host.bin / "nvidia-smi"), *QUERY.split())


def test_resource_storage_has_no_detect(host: Host) -> None:
    done = subprocess.run(
        [*binary("resource-storage"), "detect"], env=host.env(), capture_output=True, timeout=60
    )
    assert done.returncode == 2
    assert b"No such command 'detect'" in done.stderr


def test_detect_then_add_node_end_to_end(host: Host, plugin: Plugin) -> None:
    """What detect prints is the node's resource as it is: add-node takes it whole, and the
    node then holds those cards; the config's products apply on the way."""
    config = json.loads(plugin.config.read_text())
    config["products"] = {"NVIDIA GeForce RTX 3070": "nvidia-3070-8g"}
    plugin.config.write_text(json.dumps(config))
    both = MIXED_HOST[QUERY] + f"4, {A100}, GPU-aaaa, Enabled\n5, {A100}, GPU-bbbb, Disabled\n"
    host.answers({**MIG_HOST, QUERY: both})
    printed = host.detect(env={"ERU_RESOURCE_CONFIG_PATH": str(plugin.config)})
    assert printed.status == 0, printed.stderr
    request = b'{"nodename": "gpu-host", "resource": ' + printed.stdout.encode() + b"}"
    added = plugin.run("add-node", raw=request)
    assert added.status == 0, added.stderr
    expected = {"nvidia-3070-8g": 1, "nvidia-3090": 2, "nvidia-v100-sxm2-16gb": 1, **MIG_COUNTS}
    assert plugin.info("gpu-host")["capacity"] == {"prod_count_map": expected}
    # a MIG instance is scheduled like any product: the node can host one workload of 3g.20gb
    capacity = plugin.ok(
        "get-nodes-deploy-capacity",
        {"nodenames": ["gpu-host"], "workload_resource": R({MIG_3G: 1})},
    )
    assert capacity["nodes_deploy_capacity_map"]["gpu-host"]["Capacity"] == 1
