"""Shorthands for the auditor-command tests: running a command and reading its answer or its
one-line error, and planting event streams in etcd by hand (as the spec lays them out).

Planted events carry chosen times (``minute(n)``), so time points can be tested exactly.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

from tests.etcdkv import Etcd
from tests.plugin import MODE, TRANSPORT, Plugin, Result, failure_line

UTC = timezone.utc
G = "nvidia-3090"
A = "nvidia-a100"
T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)
"""Planted event ``n`` is written at ``minute(n - 1)`` unless said otherwise."""
EVENT_KEYS = {"seq", "kind", "at", "verb", "op", "by", "change", "prev", "clock", "v"}

Doc = dict[str, Any]
T = TypeVar("T")


def minute(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def stamp(at: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, as the plugin writes times: ``2026-11-01T10:00:00Z``, or
    ``2026-11-01T10:00:00.000001Z`` (microseconds only when there are some)."""
    utc = at.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- planting ------------------------------------------------------------------------------------


def event(
    seq: int,
    change: Doc,
    *,
    at: datetime | None = None,
    verb: str = "set-node-resource-usage",
    v: int = 2,
) -> Doc:
    """A stored event in the current (v2) shape."""
    doc: Doc = {
        "seq": seq,
        "at": stamp(at if at is not None else minute(seq - 1)),
        "verb": verb,
        "op": f"planted-op-{seq:06d}",
        "change": change,
        "by": "auditor@test-host",
        "v": v,
    }
    return doc


def added(capacity: dict[str, int]) -> Doc:
    return {"kind": "node_added", "capacity": capacity}


def used(delta: dict[str, int], workloads: list[dict[str, int]] | None = None) -> Doc:
    return {"kind": "usage_changed", "delta": delta, "workloads": workloads}


def grown(delta: dict[str, int]) -> Doc:
    return {"kind": "capacity_changed", "delta": delta}


REMOVED: Doc = {"kind": "node_removed"}


def head(capacity: dict[str, int], usage: dict[str, int], seq: int) -> Doc:
    return {
        "capacity": {"prod_count_map": capacity},
        "usage": {"prod_count_map": usage},
        "seq": seq,
    }


def plant(
    etcd: Etcd,
    node: str,
    events: Sequence[Doc],
    record: Doc | bytes | None,
    *,
    legacy: bool = False,
) -> None:
    """Put a node's events (and its head, unless ``record`` is None) straight into etcd;
    ``legacy``: where release 0.1 kept them, under the head."""
    key = etcd.legacy_event_key if legacy else etcd.event_key
    items = {key(node, e["seq"]): json.dumps(e).encode() for e in events}
    if record is not None:
        raw = record if isinstance(record, bytes) else json.dumps(record).encode()
        items[etcd.head_key(node)] = raw
    etcd.put_many(items)


def head_doc(etcd: Etcd, node: str) -> Doc | None:
    """The node's head as stored, decoded, without the tip of its stream (``tip``, ``at``:
    tests/audit/test_tamper.py checks those); None: no head."""
    kv = etcd.head(node)
    if kv is None:
        return None
    return {k: v for k, v in kv.json().items() if k not in ("tip", "at")}


def put_head(etcd: Etcd, node: str, record: Doc | bytes) -> None:
    raw = record if isinstance(record, bytes) else json.dumps(record).encode()
    etcd.put_many({etcd.head_key(node): raw})


def delete_key(etcd: Etcd, key: str) -> None:
    assert etcd.client.delete(key), f"{key} was not there to delete"


def write_streams(plugin: Plugin, streams: dict[str, Any]) -> None:
    """The plugin's config with a ``streams`` section (the test run's transport and mode kept)."""
    etcd = {"machines": plugin.endpoints, "prefix": plugin.prefix, "transport": TRANSPORT}
    config = {"etcd": etcd, "streams": streams, "resident": MODE == "resident"}
    plugin.config.write_text(json.dumps(config))  # JSON is YAML


# -- running commands ----------------------------------------------------------------------------


def run(plugin: Plugin, *argv: str) -> Result:
    """An auditor command: no request on stdin, everything in ``argv``."""
    return plugin.run(argv[0], None, *argv[1:])


def concurrently(call: Callable[[T], Result], items: Sequence[T]) -> list[Result]:
    """Independent binary calls at once (each is mostly a process start); results in order."""
    workers = max(2, min(4, os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(call, items))


def run_many(plugin: Plugin, commands: Sequence[Sequence[str]]) -> list[Result]:
    """Auditor commands that do not depend on each other."""
    return concurrently(lambda argv: run(plugin, *argv), commands)


def requests(plugin: Plugin, calls: Sequence[tuple[str, Doc]]) -> list[Result]:
    """Core verbs with their requests, on different nodes."""
    return concurrently(lambda call: plugin.run(call[0], call[1]), calls)


def ok_text(result: Result, what: str = "") -> str:
    assert result.status == 0, f"{what} failed ({result.status}): {result.stderr}"
    assert result.stderr == "", f"{what} wrote to stderr on success: {result.stderr!r}"
    return result.stdout


def ok_json(result: Result, what: str = "") -> Any:
    return json.loads(ok_text(result, what))


def error_line(result: Result, command: str) -> str:
    """A failure as the README promises: exit 1 (not 70, a bug), nothing on stdout, one line
    on stderr naming the command, no traceback."""
    line = failure_line(result, command)
    assert "internal error" not in line, line
    assert result.status == 1, f"{command} exited {result.status}: {line}"
    return line


def usage_error(result: Result) -> str:
    """click's usage errors: exit 2, one line, pointing at --help."""
    assert result.status == 2, (result.status, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    # "resource-gpu history: No such option ... (see 'resource-gpu history --help')"
    assert re.match(
        r"resource-gpu( [a-z-]+)?: .* \(see 'resource-gpu( [a-z-]+)? --help'\)$", lines[0]
    )
    return lines[0]


def seqs(events: Sequence[Doc]) -> list[int]:
    return [e["seq"] for e in events]


def table_rows(text: str) -> list[list[str]]:
    """A printed table as cells (columns are separated by at least two spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip()]


def cards_cell(counts: dict[str, int]) -> str:
    """How tables print a card map: ``nvidia-3090:4, nvidia-a100:2``, or ``none``."""
    return ", ".join(f"{p}:{n}" for p, n in sorted(counts.items()) if n) or "none"


@dataclass
class Chain:
    """A compacted stream read back by hand: the export files its checkpoints reference (the
    newest first) and every event they and the stream still hold."""

    files: list[Path]
    events: list[Doc]
    """Every event that is not a checkpoint, from the oldest export to the end of the stream."""


def export_chain(etcd: Etcd, node: str) -> Chain:
    """Follow the stream's first checkpoint to its export, that export's first line (the
    previous checkpoint) to its own, and so on back to event 1, checking each link: the export
    is on this host, ends with the event its checkpoint stands at, and starts with event 1 or
    the previous checkpoint."""
    live = etcd.event_docs(node)
    assert live, f"{node} has no events"
    files: list[Path] = []
    older: list[Doc] = []
    current = live[0]
    while current["change"]["kind"] == "checkpoint":
        host, _, path = current["change"]["export"].partition(":")
        assert host == socket.gethostname(), current
        export = Path(path)
        assert export.is_file(), f"checkpoint {current['seq']}: no export {export}"
        assert export not in files, f"{export} is referenced twice"
        lines = [json.loads(line) for line in export.read_bytes().splitlines()]
        assert lines and lines[-1]["seq"] == current["seq"], (export, current)
        assert lines[0]["seq"] == 1 or lines[0]["change"]["kind"] == "checkpoint", export
        files.append(export)
        older = lines + older
        current = lines[0]
    events = [e for e in older + live if e["change"]["kind"] != "checkpoint"]
    return Chain(files=files, events=events)


def prod(value: Any) -> dict[str, int]:
    """The card map inside an ``R``."""
    assert set(value) == {"prod_count_map"}, value
    return dict(value["prod_count_map"] or {})


def ok_many(plugin: Plugin, calls: Sequence[tuple[str, Doc]]) -> list[Any]:
    """Core verbs on different nodes, at once; each must succeed."""
    results = requests(plugin, calls)
    for (verb, _), result in zip(calls, results, strict=True):
        ok_text(result, verb)
    return [result.answer for result in results]


def info_request(node: str, capacity: dict[str, int], usage: dict[str, int]) -> tuple[str, Doc]:
    """``set-node-resource-info``: one call creates a node with both maps (one event)."""
    request = {
        "nodename": node,
        "capacity": {"prod_count_map": capacity},
        "usage": {"prod_count_map": usage},
    }
    return "set-node-resource-info", request


def take(node: str, cards: dict[str, int]) -> tuple[str, Doc]:
    """A deploy: ``set-node-resource-usage`` adding one workload's cards."""
    request = {
        "nodename": node,
        "workloads_resource": [{"prod_count_map": cards}],
        "delta": True,
        "incr": True,
    }
    return "set-node-resource-usage", request
