"""``resource-gpu detect``'s pure part (projections/gpu/detect.py: nvidia-smi's output, the
product rule, MIG, the ``products:`` override), the config's ``products:``, and the NVML path
(commands/gpu/detect.py) against a stand-in ``pynvml`` module."""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.commands.gpu import detect as shell
from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.ledger.host.config import ENV_VAR, parse
from resource_extend.ledger.model.errors import PluginError
from resource_extend.projections.gpu.detect import (
    Card,
    DetectError,
    answer,
    counts,
    default_product,
    driver_failure,
    explanation,
    parse_listing,
    parse_query,
    with_instances,
)
from resource_extend.projections.gpu.resources import Resource, positive_cards
from tests.unit.strategies import FAST

A100 = "NVIDIA A100-SXM4-40GB"

# What nvidia-smi --query-gpu=index,name,uuid,mig.mode.current --format=csv,noheader prints:
# ", " between fields, [N/A] for a field a card does not have.
EIGHT_MODELS = """\
0, NVIDIA GeForce RTX 3090, GPU-0a0a0a0a-1111-2222-3333-444444444444, [N/A]
1, NVIDIA GeForce RTX 3090, GPU-1b1b1b1b-1111-2222-3333-444444444444, [N/A]
2, NVIDIA GeForce RTX 3070, GPU-2c2c2c2c-1111-2222-3333-444444444444, [N/A]
3, Tesla V100-SXM2-16GB, GPU-3d3d3d3d-1111-2222-3333-444444444444, [N/A]
4, NVIDIA A100-SXM4-40GB, GPU-4e4e4e4e-1111-2222-3333-444444444444, Disabled
5, NVIDIA H100 80GB HBM3, GPU-5f5f5f5f-1111-2222-3333-444444444444, Disabled
6, Tesla T4, GPU-6a6a6a6a-1111-2222-3333-444444444444, [Not Supported]
7, NVIDIA RTX A6000, GPU-7b7b7b7b-1111-2222-3333-444444444444, [N/A]
"""

MIG_QUERY = f"""\
0, {A100}, GPU-aaaa, Enabled
1, {A100}, GPU-bbbb, Enabled
2, {A100}, GPU-cccc, Disabled
"""

# nvidia-smi -L with MIG on for GPUs 0 and 1 (1 has no instances made yet).
MIG_LISTING = f"""\
GPU 0: {A100} (UUID: GPU-aaaa)
  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
  MIG 2g.10gb     Device  1: (UUID: MIG-d7e5a2f0-53f5-6ef4-a2d8-56e82d98fc40)
  MIG 2g.10gb     Device  2: (UUID: MIG-e8f6b3a1-64a6-7fa5-b3e9-67f93ea9ad51)
GPU 1: {A100} (UUID: GPU-bbbb)
GPU 2: {A100} (UUID: GPU-cccc)
"""


# --- nvidia-smi's query ---------------------------------------------------------------------


def test_several_models_count_by_product() -> None:
    cards = parse_query(EIGHT_MODELS)
    assert [card.index for card in cards] == list(range(8))
    assert not any(card.mig for card in cards)
    assert answer(cards, {}) == {
        "prod_count_map": {
            "nvidia-3070": 1,
            "nvidia-3090": 2,
            "nvidia-a100-sxm4-40gb": 1,
            "nvidia-a6000": 1,
            "nvidia-h100-80gb-hbm3": 1,
            "nvidia-t4": 1,
            "nvidia-v100-sxm2-16gb": 1,
        }
    }


def test_whitespace_blank_lines_and_crlf_are_read_alike() -> None:
    messy = "\r\n  0 ,  NVIDIA GeForce RTX 3090 ,GPU-x,[N/A]  \r\n\r\n1,Tesla T4,GPU-y,N/A\r\n"
    assert parse_query(messy) == [
        Card(0, "NVIDIA GeForce RTX 3090", "GPU-x"),
        Card(1, "Tesla T4", "GPU-y"),
    ]


def test_a_name_with_a_comma_is_kept_whole() -> None:
    (card,) = parse_query("0, NVIDIA Some Card, Rev 2, GPU-z, Disabled\n")
    assert (card.name, card.uuid, card.mig) == ("NVIDIA Some Card, Rev 2", "GPU-z", False)


def test_no_output_is_no_gpu() -> None:
    assert parse_query("") == []
    assert answer([], {}) == {}


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ("0, NVIDIA GeForce RTX 3090, GPU-x\n", "line 1 is not index,name,uuid,mig.mode.current"),
        ("0, Tesla T4, GPU-y, [N/A]\nhello world\n", "line 2 is not"),
        ("zero, Tesla T4, GPU-y, [N/A]\n", "line 1 is not"),
        ("0, [N/A], GPU-y, [N/A]\n", "no name for GPU 0"),
        ("3, Tesla T4, [N/A], [N/A]\n", "no UUID for GPU 3"),
        ("0, Tesla T4, GPU-y, Maybe\n", "MIG mode 'Maybe' for GPU 0"),
    ],
)
def test_output_it_cannot_read_is_one_clear_error(output: str, said: str) -> None:
    with pytest.raises(DetectError) as raised:
        parse_query(output)
    assert said in raised.value.reason
    assert "\n" not in raised.value.reason


def test_the_drivers_failure_line_is_found_wherever_it_is() -> None:
    message = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    assert driver_failure(f"\n{message}\n\n") == message
    assert driver_failure("Failed to initialize NVML: Driver/library version mismatch\n")
    assert driver_failure(EIGHT_MODELS) is None


# --- MIG ------------------------------------------------------------------------------------


def test_a_card_in_mig_mode_counts_as_its_instances() -> None:
    cards = with_instances(parse_query(MIG_QUERY), parse_listing(MIG_LISTING))
    assert [card.instances for card in cards] == [("3g.20gb", "2g.10gb", "2g.10gb"), (), ()]
    assert answer(cards, {}) == {
        "prod_count_map": {
            "nvidia-a100-sxm4-40gb": 1,  # GPU 2, MIG off: the whole card
            "nvidia-a100-sxm4-40gb-mig-2g.10gb": 2,
            "nvidia-a100-sxm4-40gb-mig-3g.20gb": 1,
        }
    }


def test_mig_on_with_no_instances_counts_as_nothing() -> None:
    cards = [Card(0, A100, "GPU-a", mig=True)]
    assert counts(cards, {}) == {}
    assert answer(cards, {}) == {}


def test_the_older_drivers_listing_is_read_too() -> None:
    older = f"GPU 0: {A100} (UUID: GPU-aaaa)\n  MIG 1g.5gb Device 0: (UUID: MIG-GPU-aaaa/7/0)\n"
    assert parse_listing(older) == {"GPU-aaaa": ("1g.5gb",)}


@pytest.mark.parametrize(
    ("listing", "said"),
    [
        ("  MIG 1g.5gb     Device  0: (UUID: MIG-x)\n", "line 1 is not a GPU or a MIG device"),
        (f"GPU 0: {A100} (UUID: GPU-aaaa)\nsomething else\n", "line 2 is not"),
    ],
)
def test_a_listing_it_cannot_read_is_an_error(listing: str, said: str) -> None:
    with pytest.raises(DetectError, match=re.escape(said)):
        parse_listing(listing)


def test_a_mig_card_missing_from_the_listing_is_an_error() -> None:
    with pytest.raises(DetectError, match=r"does not list GPU 1 \(GPU-bbbb\), in MIG mode"):
        with_instances(parse_query(MIG_QUERY), parse_listing(f"GPU 0: {A100} (UUID: GPU-aaaa)"))


# --- the product rule and products: ---------------------------------------------------------


@pytest.mark.parametrize(
    ("reported", "product"),
    [
        ("NVIDIA GeForce RTX 3070", "nvidia-3070"),
        ("NVIDIA GeForce RTX 3090", "nvidia-3090"),
        ("GeForce GTX 1080 Ti", "nvidia-1080-ti"),
        ("NVIDIA GeForce RTX 4070 Laptop GPU", "nvidia-4070-laptop"),
        ("Tesla V100-SXM2-16GB", "nvidia-v100-sxm2-16gb"),
        ("Tesla T4", "nvidia-t4"),
        ("NVIDIA A100-SXM4-40GB", "nvidia-a100-sxm4-40gb"),
        ("NVIDIA A100 80GB PCIe", "nvidia-a100-80gb-pcie"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
        ("NVIDIA L4", "nvidia-l4"),
        ("NVIDIA RTX A6000", "nvidia-a6000"),
        ("Quadro RTX 8000", "nvidia-8000"),
        ("NVIDIA TITAN RTX", "nvidia-titan"),
        ("NVIDIA Graphics Device", "nvidia-graphics-device"),
        ("NVIDIA GPU", "nvidia-gpu"),  # nothing but brand words: keep them, less NVIDIA
    ],
)
def test_the_default_rule(reported: str, product: str) -> None:
    assert default_product(reported) == product


def test_a_name_with_no_letters_or_digits_asks_for_products() -> None:
    with pytest.raises(DetectError, match="map it under products: in the config"):
        default_product("ÆØÅ --")


@given(st.text(max_size=40))
@FAST
def test_every_product_the_rule_makes_is_one_add_node_takes(name: str) -> None:
    try:
        product = default_product(name)
    except DetectError:
        return
    assert re.fullmatch(r"nvidia-[a-z0-9.]+(-[a-z0-9.]+)*", product), product
    assert positive_cards(Resource({product: 1}), "detect") == {product: 1}


def test_products_override_the_rule_for_that_exact_name() -> None:
    cards = parse_query(EIGHT_MODELS)
    products = {"NVIDIA GeForce RTX 3090": "rtx3090", "nvidia geforce rtx 3070": "ignored"}
    counted = counts(cards, products)
    assert counted["rtx3090"] == 2
    assert "nvidia-3090" not in counted
    assert counted["nvidia-3070"] == 1  # the name differs in case: the rule


def test_products_name_a_mig_card_and_a_mig_instance() -> None:
    cards = with_instances(parse_query(MIG_QUERY), parse_listing(MIG_LISTING))
    products = {A100: "a100", f"{A100} MIG 3g.20gb": "half-an-a100"}
    assert counts(cards, products) == {"a100": 1, "a100-mig-2g.10gb": 2, "half-an-a100": 1}


def test_two_names_for_one_product_add_up() -> None:
    cards = [Card(0, "Tesla V100-SXM2-16GB", "GPU-a"), Card(1, "NVIDIA V100-SXM2-16GB", "GPU-b")]
    assert counts(cards, {}) == {"nvidia-v100-sxm2-16gb": 2}


def test_the_answer_is_what_add_node_decodes() -> None:
    found = answer(parse_query(EIGHT_MODELS), {})
    decoded = msgspec.json.decode(json.dumps(found), type=Resource)
    assert positive_cards(decoded, "detect") == found["prod_count_map"]


def test_the_explanation_names_each_card_and_instance() -> None:
    cards = with_instances(parse_query(MIG_QUERY), parse_listing(MIG_LISTING))
    assert explanation(cards, {}) == [
        ("GPU", "REPORTED NAME", "PRODUCT"),
        ("0", A100, "none: MIG mode, its instances count"),
        ("0", f"{A100} MIG 3g.20gb", "nvidia-a100-sxm4-40gb-mig-3g.20gb"),
        ("0", f"{A100} MIG 2g.10gb", "nvidia-a100-sxm4-40gb-mig-2g.10gb"),
        ("0", f"{A100} MIG 2g.10gb", "nvidia-a100-sxm4-40gb-mig-2g.10gb"),
        ("1", A100, "none: MIG mode, its instances count"),
        ("2", A100, "nvidia-a100-sxm4-40gb"),
    ]


# --- the config's products: ----------------------------------------------------------------

ETCD = 'etcd:\n  machines: ["http://127.0.0.1:2379"]\n'


def test_products_default_to_none_and_load_as_written() -> None:
    assert parse(ETCD).products == {}
    loaded = parse(ETCD + 'products:\n  "NVIDIA GeForce RTX 3090": nvidia-3090-24g\n')
    assert loaded.products == {"NVIDIA GeForce RTX 3090": "nvidia-3090-24g"}


@pytest.mark.parametrize(
    ("products", "said"),
    [
        ('  "Tesla T4": "  "', "which is not a product name"),
        ('  "Tesla T4": "t4\\u0007"', "which is not a product name"),
        ('  "  ": t4', "a reported card name is blank"),
        ('  "Tesla T4": 4', "Expected `str`, got `int`"),
        (f'  "Tesla T4": "{"x" * 257}"', "length <= 256"),
        ("  - t4", "Expected `object`, got `array`"),
    ],
)
def test_an_invalid_products_map_is_one_line(products: str, said: str) -> None:
    with pytest.raises(PluginError) as raised:
        parse(f"{ETCD}products:\n{products}\n", source="gpu.yaml")
    assert said in raised.value.reason
    assert raised.value.reason.startswith("config 'gpu.yaml': ")
    assert "\n" not in raised.value.reason


# --- NVML, through a stand-in pynvml --------------------------------------------------------

LIBRARY_NOT_FOUND, NOT_SUPPORTED, NOT_FOUND, DRIVER_NOT_LOADED = 12, 3, 6, 9


class FakeGPU(msgspec.Struct):
    name: str | bytes
    uuid: str
    mig: bool | None = None
    """None: the card has no MIG (NVML answers NOT_SUPPORTED)."""
    slots: dict[int, str] = {}
    """MIG slot -> the instance's name; the others are empty (NOT_FOUND)."""


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {DRIVER_NOT_LOADED: "Driver Not Loaded"}.get(self.value, f"error {self.value}")


def fake_pynvml(gpus: list[FakeGPU], *, init_fails: int | None = None) -> types.ModuleType:
    """The part of nvidia-ml-py's ``pynvml`` that detect uses, answering as NVML does."""
    module = types.ModuleType("pynvml")
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if init_fails is not None:
            raise NVMLError(init_fails)

    def mig_mode(handle: int) -> list[int]:
        if gpus[handle].mig is None:
            raise NVMLError(NOT_SUPPORTED)
        return [int(bool(gpus[handle].mig)), 0]

    def mig_handle(handle: int, slot: int) -> str:
        if slot not in gpus[handle].slots:
            raise NVMLError(NOT_FOUND)
        return gpus[handle].slots[slot]

    def name(handle: Any) -> str | bytes:
        return handle if isinstance(handle, str) else gpus[handle].name

    attributes: dict[str, Any] = {
        "NVMLError": NVMLError,
        "NVML_ERROR_LIBRARY_NOT_FOUND": LIBRARY_NOT_FOUND,
        "NVML_ERROR_NOT_SUPPORTED": NOT_SUPPORTED,
        "NVML_ERROR_NOT_FOUND": NOT_FOUND,
        "NVML_DEVICE_MIG_ENABLE": 1,
        "calls": calls,
        "nvmlInit": init,
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda index: index,
        "nvmlDeviceGetName": name,
        "nvmlDeviceGetUUID": lambda handle: gpus[handle].uuid,
        "nvmlDeviceGetMigMode": mig_mode,
        "nvmlDeviceGetMaxMigDeviceCount": lambda handle: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig_handle,
    }
    for key, value in attributes.items():
        setattr(module, key, value)
    return module


HOST = [
    FakeGPU("NVIDIA GeForce RTX 3090", "GPU-1"),
    FakeGPU(b"NVIDIA GeForce RTX 3090", "GPU-2"),  # older bindings answer bytes
    FakeGPU(A100, "GPU-3", mig=True, slots={0: f"{A100} MIG 3g.20gb", 4: f"{A100} MIG 1g.5gb"}),
    FakeGPU(A100, "GPU-4", mig=False),
]


@pytest.fixture
def no_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No nvidia-smi on PATH, no config anywhere: only NVML (or nothing) can answer."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    yield


def detect(*args: str) -> int:
    """Run ``resource-gpu detect ARGS`` in this process: its exit status."""
    from resource_extend.commands.cli import main

    with pytest.raises(SystemExit) as exited:
        main(GPU, ["detect", *args])
    return int(exited.value.code or 0)


@pytest.mark.usefixtures("no_nvidia_smi")
def test_nvml_is_read_into_the_same_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    pynvml = fake_pynvml(HOST)
    monkeypatch.setitem(sys.modules, "pynvml", pynvml)
    probe = shell.read_cards("auto")
    assert probe.source == "NVML (pynvml)"
    assert probe.cards == [
        Card(0, "NVIDIA GeForce RTX 3090", "GPU-1"),
        Card(1, "NVIDIA GeForce RTX 3090", "GPU-2"),
        Card(2, A100, "GPU-3", mig=True, instances=("3g.20gb", "1g.5gb")),
        Card(3, A100, "GPU-4"),
    ]
    assert pynvml.calls == ["init", "shutdown"]


@pytest.mark.usefixtures("no_nvidia_smi")
def test_detect_answers_from_nvml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(HOST))
    for source in ("auto", "nvml"):
        assert detect("--source", source) == 0
        out, err = capsys.readouterr()
        assert err == ""
        assert json.loads(out) == {
            "prod_count_map": {
                "nvidia-3090": 2,
                "nvidia-a100-sxm4-40gb": 1,
                "nvidia-a100-sxm4-40gb-mig-1g.5gb": 1,
                "nvidia-a100-sxm4-40gb-mig-3g.20gb": 1,
            }
        }


@pytest.mark.usefixtures("no_nvidia_smi")
def test_no_nvml_library_is_no_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(HOST, init_fails=LIBRARY_NOT_FOUND))
    for source in ("auto", "nvml"):  # auto then asks nvidia-smi, which is not there either
        assert detect("--source", source) == 0
        assert capsys.readouterr() == ("{}\n", "")


@pytest.mark.usefixtures("no_nvidia_smi")
def test_a_driver_nvml_cannot_start_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pynvml = fake_pynvml(HOST, init_fails=DRIVER_NOT_LOADED)
    monkeypatch.setitem(sys.modules, "pynvml", pynvml)
    assert detect() == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "resource-gpu detect: NVML cannot start: Driver Not Loaded\n"


@pytest.mark.usefixtures("no_nvidia_smi")
def test_an_nvml_failure_midway_is_one_line_and_nvml_is_shut_down(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pynvml = fake_pynvml([FakeGPU(A100, "GPU-3", mig=True, slots={0: A100})])
    monkeypatch.setitem(sys.modules, "pynvml", pynvml)
    assert detect() == 1
    assert capsys.readouterr().err == (
        f"resource-gpu detect: NVML names a MIG instance of GPU 0 {A100!r}, without MIG\n"
    )
    assert pynvml.calls == ["init", "shutdown"]


@pytest.mark.usefixtures("no_nvidia_smi")
def test_without_the_binding_auto_asks_nvidia_smi_and_nvml_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml: ImportError
    assert shell.read_cards("auto").source == "nothing: no nvidia-smi on PATH"
    assert detect() == 0
    assert capsys.readouterr() == ("{}\n", "")
    assert detect("--source", "nvml") == 1
    assert capsys.readouterr() == (
        "",
        "resource-gpu detect: --source nvml needs NVML's Python binding: "
        "pip install nvidia-ml-py\n",
    )
