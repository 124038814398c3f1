"""Per-call cost of resource-gpu and resource-storage, side by side with etcdctl on the same
local etcd.

Run by ``scripts/bench`` (which installs everything first). Every figure is the median wall time
of repeated whole-process runs, as core pays it (a new process per verb); each is set against
etcdctl doing the equivalent one-shot call, or for stream length against the same verb on a
short stream, run in turns with it, and the ratio is the median of the turns' own ratios
(``benching.Pair``). Prints a Markdown table (docs/speed.md quotes it).

    scripts/bench                    # the full run (about two minutes)
    scripts/bench --quick            # fewer repetitions; no 100,000-node fleet
    scripts/bench --transport grpc   # the same, over etcd's gRPC API
    scripts/bench --resident off     # every call in its own process
    scripts/bench --where            # where a call's milliseconds go, part by part
    scripts/bench --soak             # 200,000 writes over 1,000 nodes: etcd's size as it goes
    scripts/bench --long             # auditor commands on one stream of 1,000,000 events
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bench_secured import secured_rows
from scripts.bench_storage import storage_rows
from scripts.benching import GNU_TIME, benched


def where(repeat: int) -> None:
    """``--where``: the parts of a read and a write of each kind, through the helper."""
    from scripts.bench_storage import seeded
    from scripts.bench_where import gpu_and_storage_calls, where_rows

    with benched("http", True, repeat) as bench:
        bench.seed_stream("short", 10)
        bench.warm_up()
        lines = where_rows(bench, gpu_and_storage_calls(bench, seeded(bench)))
    print(
        f"where a call's time goes: http transport, resident helper on, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; medians of {repeat} whole processes, and of "
        f"{repeat * 3} steps in-process\n"
    )
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs; no 100,000 nodes")
    parser.add_argument(
        "--transport", choices=["auto", "http", "grpc"], default="auto",
        help="etcd.transport (default auto, the plugins' default)",
    )  # fmt: skip
    parser.add_argument(
        "--resident", choices=["on", "off"], default="on", help="the resident helper (default on)"
    )
    parser.add_argument(
        "--where", action="store_true", help="where a call's time goes (scripts/bench_where.py)"
    )
    soak = parser.add_argument_group("soak (instead of the per-call table: scripts/soak.py)")
    soak.add_argument("--soak", action="store_true", help="writes under the default bounds")
    soak.add_argument("--writes", type=int, default=200_000, help="default 200,000")
    soak.add_argument("--nodes", type=int, default=1_000, help="default 1,000")
    soak.add_argument(
        "--min-age", type=float, default=60.0, help="streams.min_age in the soak (default 60 s)"
    )
    long = parser.add_argument_group("one long stream (instead: scripts/long.py)")
    long.add_argument("--long", action="store_true", help="auditor commands on a long stream")
    long.add_argument("--events", type=int, default=1_000_000, help="default 1,000,000")
    options = parser.parse_args()
    if options.long:
        from scripts.long import run_long

        with tempfile.TemporaryDirectory() as tmp:
            run_long(Path(tmp), options.events)
        return
    if options.soak:
        from scripts.soak import run_soak

        with tempfile.TemporaryDirectory() as tmp:
            run_soak(Path(tmp), options.nodes, options.writes, options.min_age)
        return
    repeat = 7 if options.quick else 21
    if options.where:
        where(repeat)
        return
    resident = options.resident == "on"
    with benched(options.transport, resident, repeat) as bench:
        rss = bench.single_node()
        rss |= bench.many_nodes([1_000, 10_000])
        if not options.quick:
            rss |= bench.fleet(100_000)
        bench.long_stream(10_000 if options.quick else 100_000)
        seconds = 5 if options.quick else 15
        contended = "\n\n".join(bench.contention(seconds, writers) for writers in (8, 32))
        if resident:
            contended += "\n\n" + bench.concurrent(32, 5 if options.quick else 10)
        rss |= storage_rows(bench, [1_000] if options.quick else [1_000, 10_000])
        helper = bench.helper_memory()
        secured_rows(bench)
    print(
        f"resource-gpu and resource-storage bench: {options.transport} transport, resident helper "
        f"{options.resident}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, median of {repeat} whole-process runs, each in "
        "turns with its baseline's; a ratio is the median of the turns' ratios\n"
    )
    print("| call | ours | etcdctl / baseline | ratio | goal |")
    print("|---|---|---|---|---|")
    for row in bench.rows:
        print("| " + " | ".join(row) + " |")
    print(f"\n{bench.noise()}")
    print(f"\n{contended}")
    print("\npeak memory per call (max RSS): " + ", ".join(
        f"{what} {kib / 1024:.0f} MiB" if kib else f"{what} n/a (no {GNU_TIME})"
        for what, kib in rss.items()) + helper)  # fmt: skip


if __name__ == "__main__":
    main()
