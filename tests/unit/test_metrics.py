"""The metrics core exports per node: projections/metrics.py."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.metrics import (
    DESCRIPTIONS,
    LABELS,
    Metric,
    node_metrics,
    statsd_safe,
)
from resource_extend.projections.gpu.node import NodeState
from tests.unit.strategies import EIGHT, FAST, P70, P90, held_maps


def test_two_descriptions_with_three_labels() -> None:
    assert len(DESCRIPTIONS) == 2
    assert [d.name for d in DESCRIPTIONS] == ["gpu_capacity", "gpu_used"]
    for description in DESCRIPTIONS:
        assert description.labels == ["podname", "nodename", "product"]
        assert description.type == "gauge"
        assert description.help
    assert LABELS == ["podname", "nodename", "product"]


def test_descriptions_json_shape() -> None:
    data = json.loads(msgspec.json.encode(DESCRIPTIONS))
    assert data[0] == {
        "name": "gpu_capacity",
        "help": DESCRIPTIONS[0].help,
        "type": "gauge",
        "labels": ["podname", "nodename", "product"],
    }
    assert set(data[1]) == {"name", "help", "type", "labels"}


def test_upstream_vector_eight_card_node() -> None:
    metrics = node_metrics("testpod", "n1", EIGHT)
    assert len(metrics) == 4
    for metric in metrics:
        assert len(metric.labels) == 3
        assert metric.labels[0] == "testpod"
        assert metric.labels[1] == "n1"
        assert metric.labels[2] in {P70, P90}
    assert {m.value for m in metrics if m.name == "gpu_capacity"} == {"4"}
    assert {m.value for m in metrics if m.name == "gpu_used"} == {"0"}


def test_metric_keys_and_values() -> None:
    state = NodeState(capacity={P70: 4, P90: 2}, usage={P70: 3})
    assert node_metrics("pod", "n1", state) == [
        Metric("gpu_capacity", ["pod", "n1", P70], "core.node.n1.gpu.nvidia-3070.capacity", "4"),
        Metric("gpu_used", ["pod", "n1", P70], "core.node.n1.gpu.nvidia-3070.used", "3"),
        Metric("gpu_capacity", ["pod", "n1", P90], "core.node.n1.gpu.nvidia-3090.capacity", "2"),
        Metric("gpu_used", ["pod", "n1", P90], "core.node.n1.gpu.nvidia-3090.used", "0"),
    ]


def test_dots_become_underscores_in_node_and_product_keys_but_not_labels() -> None:
    state = NodeState(capacity={"nvidia.a100.80g": 1})
    metrics = node_metrics("pod.1", "node.example.com", state)
    assert [m.key for m in metrics] == [
        "core.node.node_example_com.gpu.nvidia_a100_80g.capacity",
        "core.node.node_example_com.gpu.nvidia_a100_80g.used",
    ]
    assert metrics[0].labels == ["pod.1", "node.example.com", "nvidia.a100.80g"]


def test_statsd_safe() -> None:
    assert statsd_safe("a.b.c") == "a_b_c"
    assert statsd_safe("plain") == "plain"
    assert statsd_safe("") == ""


def test_node_without_cards_has_no_metrics() -> None:
    assert node_metrics("pod", "n1", NodeState()) == []


def test_usage_outside_capacity_is_not_reported() -> None:
    state = NodeState(capacity={P70: 1}, usage={P70: 1, P90: 2})
    metrics = node_metrics("pod", "n1", state)
    assert {m.labels[2] for m in metrics} == {P70}
    assert len(metrics) == 2


def test_empty_podname_is_kept_as_a_label() -> None:
    metrics = node_metrics("", "n1", EIGHT)
    assert all(m.labels[0] == "" for m in metrics)


def test_metric_json_shape() -> None:
    metric = node_metrics("pod", "n1", NodeState(capacity={P70: 1}))[0]
    assert json.loads(msgspec.json.encode(metric)) == {
        "name": "gpu_capacity",
        "labels": ["pod", "n1", P70],
        "key": "core.node.n1.gpu.nvidia-3070.capacity",
        "value": "1",
    }


@FAST
@given(
    capacity=held_maps,
    usage=held_maps,
    node=st.text(alphabet="ab.-1", min_size=1, max_size=8),
)
def test_one_pair_per_capacity_product(capacity: Cards, usage: Cards, node: str) -> None:
    state = NodeState(capacity=cards.normalised(capacity), usage=cards.normalised(usage))
    metrics = node_metrics("pod", node, state)
    assert len(metrics) == 2 * len(state.capacity)
    label_count = len(DESCRIPTIONS[0].labels)
    for metric in metrics:
        assert len(metric.labels) == label_count
        product = metric.labels[2]
        assert product in state.capacity
        suffix = "capacity" if metric.name == "gpu_capacity" else "used"
        expected = state.capacity[product] if suffix == "capacity" else state.usage.get(product, 0)
        assert metric.value == str(expected)
        assert metric.value.lstrip("-").isdecimal()
        key_node = node.replace(".", "_")
        key_product = product.replace(".", "_")
        assert metric.key == f"core.node.{key_node}.gpu.{key_product}.{suffix}"
    pairs = [(m.labels[2], m.name) for m in metrics]
    assert sorted(pairs) == sorted(
        (p, n) for p in state.capacity for n in ("gpu_capacity", "gpu_used")
    )
