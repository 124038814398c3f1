"""Orphaned exports: ``.partial`` files of compactions killed before their commit.

A compaction writes its export as ``<name>.jsonl.partial``, commits its checkpoint in etcd,
then renames the file (``ledger.upkeep.export``). Killed before the commit, it leaves a ``.partial``
whose events were never removed from etcd: an *orphan*, which no checkpoint will ever name.
Killed between the commit and the rename, it leaves one a checkpoint names, whose events are
gone from etcd: ``verify --repair`` publishes that one. Etcd tells them apart: a ``.partial``
is an orphan only when every line of it is still in etcd byte for byte at its seq, so deleting
it loses nothing; anything else is left alone. So is a file younger than ``grace`` seconds:
its compaction may still be on its way to the commit.

The grace is judged by the clocks, so a compaction paused past it (stopped, a VM paused, a swap
storm) must not commit afterwards: :func:`sweep` has etcd mark the node swept before it deletes
a file, and a compaction commits only if the mark is unchanged since before it wrote its
export (``Checkpoints.replace_with_checkpoint``). One transaction or the other comes first.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from resource_extend.ledger.host.files import UnfitFile, read_small_file
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.upkeep import export

if TYPE_CHECKING:
    from resource_extend.ledger.store import Store
    from resource_extend.ledger.store.scans import Scans

GRACE = 300.0
"""Seconds a ``.partial`` is left alone after it was written. A compaction sends its commit
within its call's ``etcd.timeout`` of writing the file: far less than this."""


class Partial(msgspec.Struct, frozen=True):
    """A node's ``.partial`` export, and whether deleting it loses nothing."""

    path: Path
    first: int
    last: int
    """The seqs its name says it holds."""
    orphan: bool
    kept: str = ""
    """Why it is not an orphan (empty for one)."""


Named = tuple[Path, int, int]
"""A ``.partial`` file and the first and last seq its name says it holds."""


class _Seq(msgspec.Struct):
    seq: int


_seq = msgspec.json.Decoder(_Seq)


def partials(directory: str | Path, node: str) -> list[Named]:
    """The node's ``.partial`` files in ``directory`` (named as ``export.file_name`` names
    them; none when there is no such directory), by name."""
    folder = Path(directory).expanduser()
    if not folder.is_dir():
        return []
    pattern = re.compile(
        rf"{re.escape(export.node_part(node))}\.(\d{{12}})-(\d{{12}})\.[^./]{{1,12}}\.jsonl"
        + re.escape(export.PARTIAL)
    )
    found = []
    for path in sorted(folder.iterdir()):
        if (match := pattern.fullmatch(path.name)) is not None:
            found.append((path, int(match[1]), int(match[2])))
    return found


def classify(
    named: Named, stored: Mapping[int, bytes], *, now: float, grace: float = GRACE
) -> Partial:
    """Whether a ``.partial`` is an orphan, given the node's events in etcd (``stored``: each
    as stored, by seq) and the time (``now``, seconds since the epoch)."""
    path, first, last = named

    def kept(why: str) -> Partial:
        return Partial(path=path, first=first, last=last, orphan=False, kept=why)

    try:
        if (age := now - path.stat().st_mtime) < grace:
            return kept(f"written {age:.0f}s ago: its compaction may still commit")
        lines = read_small_file(str(path), export.MAX_EXPORT_BYTES).splitlines()
    except OSError as exc:
        return kept(f"cannot be read: {exc.strerror or exc}")
    except UnfitFile as unfit:  # a FIFO must not hang the sweep, nor a device fill it
        return kept(f"cannot be read: it {unfit}")
    for number, line in enumerate(lines, 1):
        try:
            seq = _seq.decode(line).seq
        except msgspec.DecodeError:
            return kept(f"line {number} is not an event")
        if stored.get(seq) != line:
            return kept(
                f"event {seq} is not in etcd as this file holds it (a checkpoint may name "
                "it: verify --repair publishes it then)"
            )
    return Partial(path=path, first=first, last=last, orphan=True)


def find(
    directory: str | Path,
    node: str,
    stored: Mapping[int, bytes],
    *,
    now: float | None = None,
    grace: float = GRACE,
) -> list[Partial]:
    """Every ``.partial`` of the node in ``directory``, classified against its events in etcd
    (``stored``: each as stored, by seq)."""
    when = time.time() if now is None else now
    return [classify(named, stored, now=when, grace=grace) for named in partials(directory, node)]


def find_in(
    scans: Scans, directory: str | Path, node: str, *, grace: float = GRACE
) -> list[Partial]:
    """``find``, reading from etcd only the node's events the files' names cover (one paged
    range at one revision, and none when the node has no ``.partial``)."""
    named = partials(directory, node)
    if not named:
        return []
    stored = scans.stored_between(node, min(n[1] for n in named), max(n[2] for n in named))
    now = time.time()
    return [classify(one, stored, now=now, grace=grace) for one in named]


def sweep(store: Store[Any], node: str, found: Iterable[Partial]) -> list[Path] | None:
    """Delete the node's orphans among ``found`` (the paths deleted), once etcd has marked the
    node swept while each one's first event is still there (``Checkpoints.mark_swept``): from then
    on no compaction that wrote one of them can commit. None, deleting nothing, when a
    compaction has committed past one since it was found (and ``OutcomeUnknown`` when etcd's
    answer to the mark was lost)."""
    orphaned = [partial for partial in found if partial.orphan]
    if not orphaned:
        return []
    if not store.checkpoints.mark_swept(node, [partial.first for partial in orphaned]):
        return None
    return remove(orphaned)


def remove(found: Iterable[Partial]) -> list[Path]:
    """Delete the orphans among ``found`` (one already gone counts as not deleted here); the
    paths deleted, their directory entries on disk."""
    removed = []
    for partial in found:
        if not partial.orphan:
            continue
        try:
            partial.path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise PluginError(
                f"cannot delete the orphaned export {str(partial.path)!r}: {exc.strerror or exc}"
            ) from None
        removed.append(partial.path)
    for folder in {path.parent for path in removed}:
        export.sync_directory(folder)
    return removed
