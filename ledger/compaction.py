"""Compaction: bound a stream by replacing its older events with one checkpoint.

The events to go are exported first (``ledger.export``); then one transaction puts the
checkpoint in place of the newest of them and deletes the rest. A lost race with another
compaction leaves the export file behind for nobody, so it is removed and the work redone.
"""

from __future__ import annotations

import msgspec

from ledger import export
from ledger.errors import Contention, PluginError
from ledger.store import Compacted, Store, new_op
from projections import audit

ATTEMPTS = 5
"""Compactions race only with compactions (appends never touch the keys they replace)."""


def compact(
    store: Store, node: str, *, keep: int, export_dir: str, verb: str = "compact"
) -> Compacted | None:
    """Keep the ``keep`` newest events, replace all older ones by a checkpoint.

    None when there is nothing to replace (the stream holds at most ``keep`` events after its
    first one).
    """
    for _ in range(ATTEMPTS):
        record = store.read(node, with_first=True)
        assert record.first is not None
        through = record.seq - keep
        if through <= record.first:
            return None
        stream = store.read_stream(node, after=record.first - 1, until=through)
        if not stream.events or stream.events[-1].seq != through:
            if store.read(node, with_first=True).first == record.first:
                raise PluginError(
                    f"cannot compact: event {through} is missing from the stream "
                    f"(see: resource-gpu verify {node})",
                    node=node,
                )
            continue  # compacted meanwhile by someone else
        change = audit.checkpoint_for(stream.events, export="")  # refuses a stream with gaps
        op = new_op()
        path = export.write(export_dir, node, stream.raw_events, stream.events, op)
        change = msgspec.structs.replace(change, export=export.location(path))
        checkpoint = store.new_event(through, verb, change, op)
        if store.replace_with_checkpoint(node, checkpoint, stream.event_revisions[-1]):
            return Compacted(first=change.first, checkpoint=checkpoint)
        path.unlink(missing_ok=True)
    raise Contention(f"contention: other compactions of this node won {ATTEMPTS} times", node=node)
