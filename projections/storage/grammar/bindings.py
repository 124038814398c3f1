"""Volume bindings: ``source:destination[:flags[:size[:rIOPS[:wIOPS[:rBPS[:wBPS]]]]]]``.

A binding asks for space (and disk quota) at ``destination`` inside the workload. Its source
says where it comes from: ``AUTO`` (or empty) lets the scheduler choose a volume, any other
path is mounted as is. Bindings travel as canonical 8-part strings (:meth:`Binding.canonical`),
byte-compatible with the upstream plugin, which reads ours back and we theirs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.sizes import parse_size

AUTO = "AUTO"

MAX_BINDINGS = 1024
"""No workload binds a thousand volumes; longer lists are refused before any work."""


class InvalidVolume(InvalidRequest):
    """A binding, or a list of them, that breaks the grammar or its rules."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}: invalid volume")


class Binding(msgspec.Struct, frozen=True, order=True):
    """One binding, with its flags' characters sorted (``wrm`` is ``mrw``)."""

    source: str
    destination: str
    flags: str = "rw"
    size: int = 0
    read_iops: int = 0
    write_iops: int = 0
    read_bps: int = 0
    write_bps: int = 0

    @property
    def scheduled(self) -> bool:
        """The scheduler picks its volume: the source is empty or ends with ``AUTO``."""
        return self.source == "" or self.source.endswith(AUTO)

    @property
    def has_io(self) -> bool:
        return any(self.quota)

    @property
    def quota(self) -> tuple[int, int, int, int]:
        """(read IOPS, write IOPS, read bytes/s, write bytes/s)."""
        return self.read_iops, self.write_iops, self.read_bps, self.write_bps

    @property
    def monopoly(self) -> bool:
        """Scheduled and flagged ``m``: it takes a whole volume (with its group)."""
        return self.scheduled and "m" in self.flags

    @property
    def unlimited(self) -> bool:
        """Scheduled, sizeless and without quota: placed, never charged."""
        return self.scheduled and not self.monopoly and self.size == 0 and not self.has_io

    @property
    def normal(self) -> bool:
        return self.scheduled and not self.monopoly and not self.unlimited

    @property
    def needs_scheduling(self) -> bool:
        """The placement algorithm must run for it (a mount with quota charges its disk)."""
        return self.scheduled or self.has_io

    @property
    def key(self) -> tuple[str, str, str]:
        """What merging groups by, and what a realloc matches an old plan entry on."""
        return self.source, self.destination, self.flags

    def named(self) -> str:
        """Its :attr:`key` as printed, ``src:dst:flags``: the binding whatever its numbers."""
        return f"{self.source}:{self.destination}:{_printed_flags(self.flags)}"

    def canonical(self) -> str:
        """The stored form: ``src:dst:flags:size:rIOPS:wIOPS:rBPS:wBPS``, all decimal."""
        return ":".join((self.named(), *map(str, self.numbers)))

    def engine(self) -> str:
        """The form engines read: ``m`` dropped; the 4-part form unless it has quota."""
        head = (self.source, self.destination, _printed_flags(self.flags.replace("m", "")))
        numbers = self.numbers if self.has_io else self.numbers[:1]
        return ":".join((*head, *map(str, numbers)))

    @property
    def numbers(self) -> tuple[int, int, int, int, int]:
        return self.size, *self.quota

    def with_numbers(self, size: int, quota: Iterable[int]) -> Binding:
        read_iops, write_iops, read_bps, write_bps = quota
        return msgspec.structs.replace(
            self,
            size=size,
            read_iops=read_iops,
            write_iops=write_iops,
            read_bps=read_bps,
            write_bps=write_bps,
        )

    def placed(self, path: str, size: int) -> Binding:
        """This binding with its volume chosen (the engine parameter's form)."""
        return msgspec.structs.replace(self, source=path, size=size)


def _printed_flags(flags: str) -> str:
    """``o`` (an overlay) prints as ``ro``/``wo`` in place of ``r``/``w``."""
    if "o" not in flags:
        return flags
    return flags.replace("o", "").replace("r", "ro").replace("w", "wo")


def _sorted_flags(flags: str) -> str:
    """Flag characters sorted (duplicates kept, as upstream), except that the ``o`` of the
    printed ``rowo`` counts once: ``orw`` and ``rowo`` are one binding."""
    if flags.count("o") > 1:
        flags = "o" + flags.replace("o", "")
    return "".join(sorted(flags)) or "rw"


def parse_binding(text: str) -> Binding:
    """A binding string in any of its forms; raises :class:`InvalidVolume`."""
    parts = text.split(":")
    if not 2 <= len(parts) <= 8:
        raise InvalidVolume(repr(text))
    source, destination, *rest = parts
    if destination == "":
        raise InvalidVolume(f"dest must be provided: {text!r}")
    flags = _sorted_flags(rest[0]) if rest else "rw"
    if "o" in flags and "r" not in flags and "w" not in flags:
        # printed, the o would vanish (it prints through r/w: ro, wo), and the string would
        # read back as another binding
        raise InvalidVolume(f"flag o (overlay) needs r or w: {text!r}")
    numbers = []
    for part in rest[1:]:
        try:
            numbers.append(parse_size(part))
        except InvalidRequest as exc:
            raise InvalidVolume(f"{text!r}: {exc.reason}") from None
    numbers += [0] * (5 - len(numbers))
    return Binding(source, destination, flags).with_numbers(numbers[0], numbers[1:])


def parse_bindings(texts: Iterable[str]) -> list[Binding]:
    return [parse_binding(text) for text in texts]


def check_list(bindings: list[Binding]) -> None:
    """The rules a request's list must keep, with our decision: a monopoly binding
    must have a size (upstream would split a volume 0/0)."""
    if len(bindings) > MAX_BINDINGS:
        raise InvalidVolume(f"more than {MAX_BINDINGS} bindings")
    for binding in bindings:
        if binding.monopoly and binding.size <= 0:
            if binding.size == 0 and not binding.has_io:
                raise InvalidVolume(f"monopoly volume can't be unlimited: {binding.canonical()}")
            raise InvalidVolume(f"monopoly volume must have a size: {binding.canonical()}")
        if any(value < 0 for value in binding.quota):
            raise InvalidRequest(f"invalid io parameters: {binding.canonical()}")


def check_added(asked: Sequence[Binding], held: Sequence[Binding] = ()) -> None:
    """The rules a request's bindings keep beyond the grammar, so that the engine mounts each
    one as the ledger charges it (a deploy's, or a realloc's with ``held`` the workload's
    bindings); raises :class:`InvalidVolume`.

    No destination is named twice in a request, nor may a binding the workload does not hold
    take a destination one it holds has: an engine mounts one volume at a destination. A
    binding not held must have clean paths and printable text (:func:`check_paths`); what is
    held is taken as it was stored.
    """
    held_keys = {binding.key for binding in held}
    bound = {binding.destination: binding for binding in held}
    asked_at: dict[str, Binding] = {}
    for binding in asked:
        twice = asked_at.setdefault(binding.destination, binding)
        if twice is not binding:
            raise InvalidVolume(
                f"destination {binding.destination} is bound twice in one request: "
                f"{twice.canonical()} and {binding.canonical()}"
            )
        if binding.key in held_keys:
            continue
        check_paths(binding)
        other = bound.get(binding.destination)
        if other is not None:
            raise InvalidVolume(
                f"destination {binding.destination} is already bound by {other.canonical()}: "
                f"{binding.canonical()} cannot be mounted there too"
            )


def check_paths(binding: Binding) -> None:
    """A binding's text printable, its destination a clean absolute path other than ``/``,
    and a mount's source a clean absolute path or a volume name; raises :class:`InvalidVolume`.

    Clean: no ``.`` or ``..`` component, no ``//``, no trailing ``/``. An engine refuses most
    of the rest only when it mounts, after the ledger charged them, and a source spelt with
    ``..`` would be charged to the disk of a path it does not lie under.
    """
    for part, what in ((binding.source, "source"), (binding.destination, "destination"),
                       (binding.flags, "flags")):  # fmt: skip
        if not part.isprintable():
            raise InvalidVolume(f"{what} {part!r} has a control or invisible character")
    destination = binding.destination
    if not destination.startswith("/"):
        raise InvalidVolume(f"destination {destination!r} must be an absolute path")
    if destination == "/":
        raise InvalidVolume("destination can't be '/': it is the workload's root")
    _check_clean(destination, "destination")
    source = binding.source
    if binding.scheduled:
        return
    if source.startswith("/"):
        _check_clean(source, "source")
    elif "/" in source or source in (".", ".."):
        raise InvalidVolume(f"source {source!r} must be an absolute path or a volume name")


def _check_clean(path: str, what: str) -> None:
    if path == "/":
        return
    components = path.split("/")[1:]
    if components[-1] == "":
        raise InvalidVolume(f"{what} {path!r} has a trailing '/'")
    for bad, named in (("..", "a '..' component"), (".", "a '.' component"), ("", "'//'")):
        if bad in components:
            raise InvalidVolume(f"{what} {path!r} has {named}")


def sort_bindings(bindings: Iterable[Binding]) -> list[Binding]:
    """By canonical string: the order every list and plan is kept in (where upstream followed Go's
    random map order)."""
    return sorted(bindings, key=Binding.canonical)


def merge(*lists: Iterable[Binding]) -> list[Binding]:
    """Realloc's merge: bindings with the same (source, destination, flags) add their
    size and quota; a group whose size ends below zero is dropped (that removes it)."""
    groups: dict[tuple[str, str, str], Binding] = {}
    for binding in (b for bindings in lists for b in bindings):
        was = groups.get(binding.key)
        if was is None:
            groups[binding.key] = binding
        else:
            quota = (a + b for a, b in zip(was.quota, binding.quota, strict=True))
            groups[binding.key] = was.with_numbers(was.size + binding.size, quota)
    return sort_bindings(b for b in groups.values() if b.size >= 0)
