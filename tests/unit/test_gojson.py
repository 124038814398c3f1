"""Strings in node records as Go's encoding/json writes them: projections/gojson.py."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from resource_extend.projections.gojson import go_escaped
from resource_extend.projections.gpu.node import GPU, NodeState
from resource_extend.projections.storage.events import encode_record
from resource_extend.projections.storage.wire.resources import NodeResource
from tests.unit.strategies import FAST


def test_a_gpu_record_is_go_s_bytes_for_any_product_name() -> None:
    """What Go's json.Marshal wrote for this record (plus seq): <, >, & and the two separators
    escaped, everything else as it is."""
    record = GPU.write_head(NodeState(capacity={"a<b>&c\u2028\u2029é": 1}), 4)
    assert record == (
        b'{"capacity":{"prod_count_map":{"a\\u003cb\\u003e\\u0026c\\u2028\\u2029\xc3\xa9":1}},'
        b'"usage":{"prod_count_map":{}},"seq":4}'
    )


def test_a_storage_record_escapes_its_paths_as_go_does() -> None:
    capacity = NodeResource(volumes={"/d<&>": 1}, disks=[], storage=1)
    usage = NodeResource(volumes={"/d<&>": 0}, disks=[], storage=0)
    record = encode_record(capacity, usage, 2)
    assert b'"volumes":{"/d\\u003c\\u0026\\u003e":1}' in record
    assert b"<" not in record and b"&" not in record


@FAST
@given(text=st.text())
def test_escaping_changes_no_value(text: str) -> None:
    encoded = json.dumps({text: [text]}, ensure_ascii=False).encode()
    assert json.loads(go_escaped(encoded)) == {text: [text]}
