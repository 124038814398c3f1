"""The monopoly step of upstream's placement (step 4): a group of monopoly bindings takes a whole
unused volume per copy, split in proportion to the bindings' sizes."""

from __future__ import annotations

from collections.abc import Sequence

from resource_extend.projections.storage.grammar.bindings import Binding
from resource_extend.projections.storage.grammar.disks import NO_QUOTA, Quota, fits, subtract
from resource_extend.projections.storage.placement.scheduler_view import Classes, Host


def shares(mono: Sequence[Binding], whole: int) -> list[int]:
    """A monopoly group's split of a ``whole`` volume: each binding ⌊size / Σsizes * whole⌋ in
    float64 as upstream computes it, and what rounding leaves to the first (the smallest,
    ties by canonical string), so that the shares add up to ``whole``."""
    total = sum(b.size for b in mono)
    split = [int(float(b.size) / float(total) * float(whole)) if total else 0 for b in mono]
    split[0] += whole - sum(split)
    return split


def mono_volumes(
    host: Host, unused: Sequence[str], classes: Classes, left: dict[str, Quota]
) -> list[str]:
    """The unused volumes a monopoly group qualifies for, in list order, charging ``left``."""
    size, quota = classes.mono_size, classes.mono_quota
    free = host.free
    if not any(quota):
        return [path for path in unused if free[path] >= size]
    chosen = []
    for path in unused:
        if free[path] < size:
            continue
        device = host.disk_of(path)
        if not fits(quota, NO_QUOTA if device is None else left[device]):
            continue
        chosen.append(path)
        if device is not None:
            left[device] = subtract(left[device], quota)
    return chosen


class MonoCount:
    """The monopoly count of an unused list without walking it: a group qualifies for the
    first ⌊left / quota⌋ volumes of each disk that hold it (each takes the quota once)."""

    def __init__(self, host: Host, unused: Sequence[str], classes: Classes) -> None:
        self.host = host
        self.size, self.quota = classes.mono_size, classes.mono_quota
        self.by_disk = any(self.quota)
        """Whether the group charges quota: counted per disk, else all under ``None``."""
        self.holding: dict[str | None, int] = {}
        free, size = host.free, self.size
        for path in unused:
            if free[path] >= size:
                device = host.disk_of(path) if self.by_disk else None
                self.holding[device] = self.holding.get(device, 0) + 1

    def remove(self, path: str) -> None:
        if self.host.free[path] >= self.size:
            device = self.host.disk_of(path) if self.by_disk else None
            self.holding[device] -= 1

    def count(self, spent: Quota) -> int:
        """The count once each disk has lost ``spent`` more (never below zero)."""
        if not self.by_disk:
            return sum(self.holding.values())
        total = 0
        for device, holding in self.holding.items():
            if device is None:
                continue
            left = subtract(self.host.left[device], spent)
            total += min(
                [holding]
                + [
                    max(have, 0) // want
                    for have, want in zip(left, self.quota, strict=True)
                    if want
                ]
            )
        return total
