"""Packed attributes (trajgrade.core.packed_attributes): a read-only mapping equal to the dict it packs, in its order,
whose key tuple is shared by every mapping of the same keys; as an open root's breach event, exported by the real
OTLP encoder and by ``to_json`` exactly as the dict would be."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from factories import TRACE_ID
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import Event, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trajgrade import Evidence, GraderResult
from trajgrade.core import semconv as sc
from trajgrade.core.emit import add_breach_event
from trajgrade.core.inflight import Breach
from trajgrade.core.packed_attributes import PackedAttributes
from trajgrade.core.result_attributes import breach_attributes

ITEMS: dict[str, Any] = {"b.name": "calls", "a.score": 0.25, "c.ids": ("01", "02"), "d.flag": True, "e.count": 4}


def test_it_reads_as_the_dict_it_packs() -> None:
    packed = PackedAttributes(ITEMS)
    assert packed == ITEMS and ITEMS == packed
    assert list(packed) == list(ITEMS) and list(packed.items()) == list(ITEMS.items())
    assert len(packed) == 5 and "c.ids" in packed and "z" not in packed
    assert packed["e.count"] == 4 and packed.get("z") is None and dict(packed) == ITEMS
    with pytest.raises(KeyError):
        packed["z"]
    assert packed != {**ITEMS, "e.count": 5}
    assert repr(packed) == f"PackedAttributes({ITEMS!r})"


def test_mappings_of_the_same_keys_share_them_and_cost_less_than_a_dict() -> None:
    one, two = PackedAttributes(ITEMS), PackedAttributes({**ITEMS, "a.score": 1.0})
    assert one._layout is two._layout and two["a.score"] == 1.0
    twelve = {f"key.{i}": i for i in range(12)}
    packed = PackedAttributes(twelve)
    assert sys.getsizeof(packed) + sys.getsizeof(packed._values) < sys.getsizeof(twelve) / 2


def _breach() -> Breach:
    failed = GraderResult(
        name="calls",
        type="tool-call-count",
        status="fail",
        score=0.0,
        value=4,
        limit=3,
        explanation="4 tool calls, more than the 3 allowed",
        evidence=(Evidence("the 4th call", ("00000000000000a1", "00000000000000a2")),),
    )
    return Breach(TRACE_ID, "bench", failed, enforce=True)


def test_a_breach_event_exports_as_its_dict_would() -> None:
    """The root's event holds packed attributes; the OTLP protobuf and ``to_json`` of the ended root are those of the
    same root with the event's attributes as a dict."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    root = provider.get_tracer("t").start_span("invoke_agent bench", start_time=1)
    breach = _breach()
    add_breach_event(root, breach)
    (event,) = root.events  # type: ignore[attr-defined]
    assert isinstance(event.attributes, PackedAttributes)
    root.end(end_time=2)
    (span,) = exporter.get_finished_spans()
    packed = (encode_spans([span]).SerializeToString(), json.loads(span.to_json()))
    span._events = (Event(event.name, breach_attributes(breach), event.timestamp),)  # the same event, as a dict
    as_dict = (encode_spans([span]).SerializeToString(), json.loads(span.to_json()))
    assert packed == as_dict
    assert b"4 tool calls, more than the 3 allowed" in packed[0]
    ids = packed[1]["events"][0]["attributes"][sc.TRAJGRADE_EVIDENCE_SPAN_IDS]
    assert ids == ["00000000000000a1", "00000000000000a2"]


def test_a_string_or_strings_equal_to_the_previous_mappings_are_its_object() -> None:
    """Consecutive events of the same keys share their equal strings and tuples of strings, and nothing that only
    compares equal (a bool and an int, -0.0 and 0.0)."""
    ids, text = ("01", "02"), "loop found"
    PackedAttributes({"ids": ids, "text": text, "zero": 0.0, "flag": (True,), "name": "a"})
    again: dict[str, Any] = {"ids": tuple("".join(["0", d]) for d in "12"), "text": " ".join(["loop", "found"])}
    again.update(zero=-0.0, flag=(1,), name="b")
    assert again["ids"] is not ids and again["ids"] == ids and again["text"] is not text
    second = PackedAttributes(again)
    assert second["ids"] is ids and second["text"] is text
    assert str(second["zero"]) == "-0.0" and second["flag"] == (1,) and type(second["flag"][0]) is int
    assert second == again and second["name"] == "b"
