"""Drive one node through core's flows against a throwaway etcd, then print its history.

Run by ``scripts/demo`` (which installs everything first). Each step shows the verb, the
request core would send on stdin, and the plugin's answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.etcd_server import Cluster  # the same throwaway etcd the tests use

NODE = "gpu-node-1"


def R(counts: dict[str, int]) -> dict[str, Any]:
    return {"prod_count_map": counts}


def call(config: Path, verb: str, request: dict[str, Any]) -> Any:
    print(f"\n$ echo '{json.dumps(request)}' | resource-gpu {verb}")
    done = subprocess.run(
        ["resource-gpu", "--config", str(config), verb],
        input=json.dumps(request).encode(),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"demo step failed: {done.stderr.decode().strip()}")
    print(done.stdout.decode().strip())
    return json.loads(done.stdout)


def main() -> None:
    etcd = Cluster(1).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # The resident helper the first call starts lives in a runtime directory of the
            # demo's own, and is stopped at the end: nothing of the user's is touched or left.
            runtime = Path(tmp, "run")
            runtime.mkdir(mode=0o700)
            os.environ["XDG_RUNTIME_DIR"] = str(runtime)
            config = Path(tmp) / "gpu.yaml"
            config.write_text(f'etcd:\n  machines: ["{etcd.endpoints[0]}"]\n  prefix: "/demo"\n')
            print(f"# a throwaway etcd at {etcd.endpoints[0]}; config {config}")
            try:
                drive(config)
                print(f"\n$ resource-gpu history {NODE}")
                plugin = ["resource-gpu", "--config", str(config)]
                subprocess.run([*plugin, "history", NODE], check=True)
                print("\n# the resident helper that served the calls after the first")
                print("$ resource-gpu helper")
                subprocess.run([*plugin, "helper"], check=False)
            finally:
                print("\n$ resource-gpu helper --all --stop")
                subprocess.run(["resource-gpu", "helper", "--all", "--stop"], check=False)
    finally:
        etcd.stop()


def drive(config: Path) -> None:
    print("\n# 1. core adds a node with 4 RTX 3090 and 2 RTX 3070")
    capacity = R({"nvidia-3090": 4, "nvidia-3070": 2})
    call(config, "add-node", {"nodename": NODE, "resource": capacity})

    print("\n# 2. core deploys two workloads of one 3090 each")
    one_3090 = R({"nvidia-3090": 1})
    call(config, "get-nodes-deploy-capacity", {"nodenames": [NODE], "workload_resource": one_3090})
    plan = call(
        config,
        "calculate-deploy",
        {"nodename": NODE, "deploy_count": 2, "workload_resource_request": one_3090},
    )
    workloads = plan["workloads_resource"]
    call(
        config,
        "set-node-resource-usage",
        {"nodename": NODE, "workloads_resource": workloads, "delta": True, "incr": True},
    )

    print("\n# 3. the first workload is reallocated: one more 3090, and a 3070")
    realloc = call(
        config,
        "calculate-realloc",
        {
            "nodename": NODE,
            "workload_resource": workloads[0],
            "workload_resource_request": R({"nvidia-3090": 1, "nvidia-3070": 1}),
        },
    )
    call(
        config,
        "set-node-resource-usage",
        {
            "nodename": NODE,
            "workloads_resource": [realloc["delta_resource"]],
            "delta": True,
            "incr": True,
        },
    )
    first = realloc["workload_resource"]

    print("\n# 4. the second workload is removed: its card is released")
    call(
        config,
        "set-node-resource-usage",
        {"nodename": NODE, "workloads_resource": [workloads[1]], "delta": True, "incr": False},
    )

    print("\n# 5. drift: a crashed deploy left 2 cards counted that no workload holds")
    call(
        config,
        "set-node-resource-usage",
        {"nodename": NODE, "resource_request": R({"nvidia-3090": 2}), "delta": True, "incr": True},
    )
    call(config, "get-node-resource-info", {"nodename": NODE, "workloads_resource": [first]})

    print("\n# 6. the operator repairs it (eru-cli node resource --fix): usage := workload sums")
    call(config, "fix-node-resource", {"nodename": NODE, "workloads_resource": [first]})


if __name__ == "__main__":
    main()
