"""What ``resource-gpu detect`` makes of a host's GPUs: ``{"prod_count_map": {product: count}}``,
the request ``add-node`` and ``eru-cli node add --extra-resources`` take.

Input is what NVML reports, read by ``nvidia-smi`` (or NVML's Python binding, into the same
:class:`Card`): ``nvidia-smi --query-gpu=index,name,uuid,mig.mode.current --format=csv,noheader``
and, when a card has MIG on, ``nvidia-smi -L``.

Products, by default: the reported name, lower-cased, split into words of letters, digits and
dots, without the brand words (:data:`BRAND_WORDS`), joined with ``-`` and prefixed
``nvidia-``: ``NVIDIA GeForce RTX 3090`` is ``nvidia-3090``, ``NVIDIA A100-SXM4-40GB`` is
``nvidia-a100-sxm4-40gb``, ``Tesla T4`` is ``nvidia-t4``. The config's ``products:`` map (exact
reported name -> product) overrides the rule, name by name.

MIG: eru pins whole units by product and never divides one. A card in MIG mode cannot be used
whole (CUDA on it sees only its MIG devices, one per process), so it counts as its MIG
instances, each a product of its own, ``<card's product>-mig-<profile>``
(``nvidia-a100-sxm4-40gb-mig-3g.20gb``), as NVIDIA's Kubernetes plugin counts them in its mixed
strategy; ``products:`` may name an instance by ``<card name> MIG <profile>``, as NVML names it.
A card in MIG mode with no instances made counts as nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import msgspec

from resource_extend.ledger.model.errors import PluginError

QUERY_FIELDS = "index,name,uuid,mig.mode.current"
"""The ``--query-gpu`` fields :func:`parse_query` reads, in this order."""

BRAND_WORDS = frozenset({"nvidia", "geforce", "tesla", "quadro", "rtx", "gtx", "gpu"})
"""Words the default rule drops: brands and series, not models."""

PREFIX = "nvidia-"

_WORD = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")
_GPU_LINE = re.compile(r"GPU\s+(\d+):\s+(.*?)\s+\(UUID:\s*([^\s)]+)\)")
_MIG_LINE = re.compile(r"\s+MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*([^\s)]+)\)")
_DRIVER_FAILURES = ("NVIDIA-SMI has failed", "Failed to initialize NVML")


class Card(msgspec.Struct, frozen=True):
    """One physical GPU as the driver reports it."""

    index: int
    name: str
    uuid: str
    mig: bool = False
    """MIG mode is on (``mig.mode.current`` is ``Enabled``)."""
    instances: tuple[str, ...] = ()
    """The profiles of its MIG instances (``3g.20gb``), one per instance."""


class Row(msgspec.Struct, frozen=True):
    """One line of ``detect --explain``: what a card (or one MIG instance) counts as."""

    index: int
    reported: str
    product: str
    counted: bool = True
    """False for a card in MIG mode: its instances count, it does not."""


class DetectError(PluginError):
    """The driver failed, or its output is not what this module reads."""


def driver_failure(output: str) -> str | None:
    """The driver's own failure line in ``nvidia-smi`` output, if it printed one."""
    for line in output.splitlines():
        if line.strip().startswith(_DRIVER_FAILURES):
            return line.strip()
    return None


def parse_query(text: str) -> list[Card]:
    """Cards from the CSV of ``--query-gpu=index,name,uuid,mig.mode.current``. A name may hold
    commas: the index comes first and the UUID and MIG mode last."""
    cards = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        first, _, rest = line.partition(",")
        fields = [field.strip() for field in (first, *rest.rsplit(",", 2))]
        if len(fields) != 4 or not fields[0].isdigit():
            raise DetectError(f"nvidia-smi query line {number} is not {QUERY_FIELDS}: {line!r}")
        index, name, uuid, mode = int(fields[0]), fields[1], fields[2], fields[3]
        if _missing(name):
            raise DetectError(f"nvidia-smi reports no name for GPU {index}")
        if _missing(uuid):
            raise DetectError(f"nvidia-smi reports no UUID for GPU {index} ({name})")
        cards.append(Card(index, name, uuid, mig=_mig_on(mode, index)))
    return cards


def _missing(value: str) -> bool:
    return not value or value == "N/A" or (value.startswith("[") and value.endswith("]"))


def _mig_on(mode: str, index: int) -> bool:
    """``Enabled`` or ``Disabled``; ``[N/A]``, ``[Not Supported]``: a card without MIG."""
    if mode in ("Enabled", "Disabled") or _missing(mode):
        return mode == "Enabled"
    raise DetectError(f"nvidia-smi reports MIG mode {mode!r} for GPU {index}")


def parse_listing(text: str) -> dict[str, tuple[str, ...]]:
    """The MIG profiles of each card's instances, by card UUID, from ``nvidia-smi -L``::

    GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)
      MIG 3g.20gb     Device  0: (UUID: MIG-...)
    """
    found: dict[str, list[str]] = {}
    card: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if gpu := _GPU_LINE.fullmatch(line.rstrip()):
            card = found.setdefault(gpu.group(3), [])
        elif (mig := _MIG_LINE.fullmatch(line.rstrip())) and card is not None:
            card.append(mig.group(1))
        else:
            raise DetectError(f"nvidia-smi -L line {number} is not a GPU or a MIG device: {line!r}")
    return {uuid: tuple(profiles) for uuid, profiles in found.items()}


def with_instances(cards: Sequence[Card], listing: Mapping[str, tuple[str, ...]]) -> list[Card]:
    """``cards`` with the MIG instances of those in MIG mode, from :func:`parse_listing`."""
    done = []
    for card in cards:
        if card.mig:
            if card.uuid not in listing:
                raise DetectError(
                    f"nvidia-smi -L does not list GPU {card.index} ({card.uuid}), in MIG mode"
                )
            card = msgspec.structs.replace(card, instances=listing[card.uuid])
        done.append(card)
    return done


def default_product(name: str) -> str:
    """The default rule: ``NVIDIA GeForce RTX 3090`` -> ``nvidia-3090``."""
    words = _WORD.findall(name.lower())
    model = [word for word in words if word not in BRAND_WORDS]
    model = model or [word for word in words if word != "nvidia"]
    if not model:
        raise DetectError(
            f"no product can be made of the name {name!r}: map it under products: in the config"
        )
    return PREFIX + "-".join(model)


def mig_name(card_name: str, profile: str) -> str:
    """A MIG instance's name as NVML gives it: ``NVIDIA A100-SXM4-40GB MIG 3g.20gb``."""
    return f"{card_name} MIG {profile}"


def rows(cards: Sequence[Card], products: Mapping[str, str]) -> list[Row]:
    """What each card, and each MIG instance, counts as, in the cards' order."""
    found = []
    for card in sorted(cards, key=lambda card: card.index):
        product = products.get(card.name) or default_product(card.name)
        found.append(Row(card.index, card.name, product, counted=not card.mig))
        for profile in card.instances:
            name = mig_name(card.name, profile)
            found.append(Row(card.index, name, products.get(name) or f"{product}-mig-{profile}"))
    return found


def counts(cards: Sequence[Card], products: Mapping[str, str]) -> dict[str, int]:
    """Product -> how many units of it, sorted by product."""
    counted: dict[str, int] = {}
    for row in rows(cards, products):
        if row.counted:
            counted[row.product] = counted.get(row.product, 0) + 1
    return dict(sorted(counted.items()))


def answer(cards: Sequence[Card], products: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """``{"prod_count_map": {...}}``, or ``{}`` when nothing counts (no GPU), as the peer says."""
    counted = counts(cards, products)
    return {"prod_count_map": counted} if counted else {}


def explanation(cards: Sequence[Card], products: Mapping[str, str]) -> list[tuple[str, ...]]:
    """The ``--explain`` table: a header, then a line per card and per MIG instance."""
    lines: list[tuple[str, ...]] = [("GPU", "REPORTED NAME", "PRODUCT")]
    for row in rows(cards, products):
        product = row.product if row.counted else "none: MIG mode, its instances count"
        lines.append((str(row.index), row.reported, product))
    return lines
