"""Types of the sidecar's OTLP reader and result encoder (``_protowire.c``)."""

from abc import ABCMeta
from collections.abc import Set
from typing import Any

from trajgrade.spans import SpanEvent, SpanView

class Event(SpanEvent, metaclass=ABCMeta):
    @property
    def attributes(self) -> dict[str, Any]: ...

class Span(SpanView, metaclass=ABCMeta):
    """A ``SpanView`` (a struct sequence, made by the reader only) with plain containers, and where it stands
    in its request."""

    @property
    def attributes(self) -> dict[str, Any]: ...
    @property
    def events(self) -> tuple[Event, ...]: ...
    @property
    def resource_attributes(self) -> dict[str, Any]: ...
    @property
    def resource_index(self) -> int: ...
    @property
    def scope_index(self) -> int: ...
    @property
    def index(self) -> int: ...

def read_request(body: bytes, keys: Set[str] | None = None, prefixes: tuple[str, ...] = ()) -> list[Span]: ...
def read_span(span: bytes, resource_attributes: dict[str, Any], scope_name: str) -> Span: ...
def encode_result_fields(
    events: list[dict[str, Any]], attributes: dict[str, Any], time_unix_nano: int, event_name: str
) -> bytes: ...
