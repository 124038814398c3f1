"""``resource-gpu detect``: this host's GPUs as the ``{"prod_count_map": ...}`` a node is added
with. The shell: it asks NVML (its Python binding) or ``nvidia-smi``, and
``projections.gpu.detect`` makes the answer of what they report."""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import warnings
from typing import TYPE_CHECKING, Any

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.protocol import Answer, Session
from resource_extend.commands.tables import columns
from resource_extend.commands.under_click import answered, click_config
from resource_extend.ledger.host import config
from resource_extend.projections.gpu import detect as rules
from resource_extend.projections.gpu.detect import Card, DetectError, driver_failure

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

TIMEOUT = 20.0
"""Seconds one ``nvidia-smi`` run may take (it takes seconds on a host with many cards and
persistence mode off)."""

NO_DEVICES = "No devices were found"
"""What ``nvidia-smi`` prints (exit 6) on a host whose driver sees no GPU."""


class Probe(msgspec.Struct, frozen=True):
    """The cards found, and what they were read with (for ``--explain``)."""

    cards: list[Card]
    source: str


@click.command("detect")
@click.option(
    "--source",
    type=click.Choice(["auto", "nvml", "nvidia-smi"]),
    default="auto",
    show_default=True,
    help="Read the cards with NVML's Python binding (exit 1 if it is not installed), with "
    "nvidia-smi (none on PATH: no driver, so {}), or (auto) with NVML where the binding is "
    "installed, else nvidia-smi.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Print each card's reported name and the product it counts as, then the answer.",
)
@answered
def detect(session: Session[Struct], source: str, explain: bool) -> Answer:
    """Print this host's GPUs as {"prod_count_map": {PRODUCT: COUNT}}, what add-node and
    eru-cli node add --extra-resources take.

    \b
    {prog} detect               # {"prod_count_map":{"nvidia-3090":4}}
    {prog} detect --explain     # each card: its index, reported name and product
    {prog} detect | jq -c '{nodename: "n1", resource: .}' | {prog} add-node
    eru-cli node add --extra-resources "{\\"resource-gpu\\": $({prog} detect)}" ...

    Cards are read with NVML's Python binding where it is installed (pip install
    nvidia-ml-py), else with the nvidia-smi found on PATH (run directly, 20 s at most):

    \b
      nvidia-smi --query-gpu=index,name,uuid,mig.mode.current --format=csv,noheader
      nvidia-smi -L    (only with a card in MIG mode: its MIG instances)

    No driver or no GPU: {} and exit 0. nvidia-smi and NVML's library come with the driver,
    so a host without them has no card to count (--explain says which was missing). NVML's
    Python binding does not: it is a package of its own, so "--source nvml" without it is
    an install to fix, not a host without GPUs (one line naming the pip command, exit 1;
    "auto" falls back to nvidia-smi). A failing driver (nvidia-smi exits non-zero, NVML
    cannot start) or output it cannot read: one line on stderr, exit 1.

    Products: the reported name, lower-cased, without the words NVIDIA, GeForce, Tesla,
    Quadro, RTX, GTX and GPU, its other words (letters, digits, dots) joined with "-" and
    prefixed "nvidia-": "NVIDIA GeForce RTX 3090" is nvidia-3090, "NVIDIA A100-SXM4-40GB" is
    nvidia-a100-sxm4-40gb, "Tesla T4" is nvidia-t4. A "products:" map in the config (exact
    reported name: product) overrides the rule; here the config is optional (none found:
    the rule alone), but one that is named or found must be valid.

    MIG: eru pins whole units by product, and a card in MIG mode cannot be used whole, so it
    counts as its MIG instances, each a product "<card's product>-mig-<profile>"
    (nvidia-a100-sxm4-40gb-mig-3g.20gb); with no instances made it counts as nothing.
    "products:" names an instance as NVML does: "NVIDIA A100-SXM4-40GB MIG 3g.20gb".
    """
    products = configured_products(session.plugin, click_config())
    probe = read_cards(source)
    answer = rules.answer(probe.cards, products)
    if not explain:
        return answer
    return explanation(probe, rules.explanation(probe.cards, products), answer)


def configured_products(plugin: Plugin, explicit: str | None) -> dict[str, str]:
    """The config's ``products:``; none when no config is named (``--config``, the
    environment) and none lies in the working directory."""
    path = config.config_path(explicit, plugin.config_file)
    named = explicit or os.environ.get(config.ENV_VAR)
    if not named and not os.path.lexists(path):
        return {}
    return config.load(path, default=plugin.config_file).products


def explanation(probe: Probe, table: list[tuple[str, ...]], answer: object) -> str:
    lines = [f"read with: {probe.source}"]
    if probe.cards:
        lines.append(columns(table))
    lines.append(f"answer: {msgspec.json.encode(answer).decode()}")
    return "\n".join(lines)


def read_cards(source: str) -> Probe:
    """The cards, read as ``--source`` says; none when there is no driver or no GPU."""
    if source != "nvidia-smi":
        pynvml = binding()
        if pynvml is None and source == "nvml":
            raise DetectError("--source nvml needs NVML's Python binding: pip install nvidia-ml-py")
        if pynvml is not None:
            cards = read_nvml(pynvml)
            if cards is not None:
                return Probe(cards, "NVML (pynvml)")
            if source == "nvml":
                return Probe([], "nothing: NVML's library is not installed (no driver)")
    return read_nvidia_smi()


def binding() -> Any:
    """NVML's Python binding (``pynvml``, of the nvidia-ml-py package), if installed."""
    with warnings.catch_warnings():  # the old "pynvml" package warns that it is deprecated
        warnings.simplefilter("ignore")
        try:
            return importlib.import_module("pynvml")
        except ImportError:
            return None


def read_nvml(pynvml: Any) -> list[Card] | None:
    """Every card NVML sees; None when NVML's library (the driver) is not installed."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        if _code(exc) == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            return None
        raise DetectError(f"NVML cannot start: {_said(exc)}") from None
    try:
        cards = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = _text(pynvml.nvmlDeviceGetName(handle))
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            mig = _mig_on(pynvml, handle)
            instances = _mig_profiles(pynvml, handle, index) if mig else ()
            cards.append(Card(index, name, uuid, mig=mig, instances=instances))
        return cards
    except pynvml.NVMLError as exc:
        raise DetectError(f"NVML failed: {_said(exc)}") from None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _mig_on(pynvml: Any, handle: Any) -> bool:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError as exc:
        if _code(exc) == pynvml.NVML_ERROR_NOT_SUPPORTED:  # a card without MIG
            return False
        raise
    return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)


def _mig_profiles(pynvml: Any, handle: Any, index: int) -> tuple[str, ...]:
    """The profile of each MIG instance (NVML names one "<card name> MIG <profile>"); the
    slots are sparse: an empty one is NOT_FOUND."""
    profiles = []
    for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            instance = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError as exc:
            if _code(exc) == pynvml.NVML_ERROR_NOT_FOUND:
                continue
            raise
        name = _text(pynvml.nvmlDeviceGetName(instance))
        _, marker, profile = name.rpartition(" MIG ")
        if not marker or not profile.strip():
            raise DetectError(f"NVML names a MIG instance of GPU {index} {name!r}, without MIG")
        profiles.append(profile.strip())
    return tuple(profiles)


def _code(exc: BaseException) -> object:
    return getattr(exc, "value", None)


def _said(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _text(value: str | bytes) -> str:
    """Older bindings answer bytes."""
    return (value.decode(errors="replace") if isinstance(value, bytes) else value).strip()


def read_nvidia_smi() -> Probe:
    """Every card ``nvidia-smi`` on PATH sees, and the MIG instances of those in MIG mode."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return Probe([], "nothing: no nvidia-smi on PATH")
    query = nvidia_smi(tool, f"--query-gpu={rules.QUERY_FIELDS}", "--format=csv,noheader")
    cards = rules.parse_query(query) if query is not None else []
    if any(card.mig for card in cards):
        cards = rules.with_instances(cards, rules.parse_listing(nvidia_smi(tool, "-L") or ""))
    return Probe(cards, tool)


def nvidia_smi(tool: str, *args: str) -> str | None:
    """Its stdout; None when it finds no GPU. Run directly (no shell), with a timeout."""
    try:
        done = subprocess.run(
            [tool, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise DetectError(f"nvidia-smi {args[0]} did not answer within {TIMEOUT:g} s") from None
    except OSError as exc:
        raise DetectError(f"cannot run {tool}: {exc.strerror or exc}") from None
    out = done.stdout.decode(errors="replace")
    said = f"{out}\n{done.stderr.decode(errors='replace')}"
    failure = driver_failure(said)
    if failure is not None:
        raise DetectError(
            f"the NVIDIA driver failed (nvidia-smi exit {done.returncode}): {failure}"
        )
    if NO_DEVICES in said:
        return None
    if done.returncode != 0:
        message = " ".join(said.split())[:300] or "no message"
        raise DetectError(f"nvidia-smi {args[0]} failed (exit {done.returncode}): {message}")
    return out
