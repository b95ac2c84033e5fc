"""A trace's buffered records hold one copy of each string value that repeats, whatever made the strings."""

from __future__ import annotations

from trajgrade.core.assembler import Assembler
from trajgrade.core.trajectory.normalize import SpanRecord
from trajgrade.core.trajectory.records import span_record


def _fresh(text: str) -> str:
    """An equal string that is a new object (as a wire reader makes one for every span)."""
    return "".join(list(text))


def _record(span_id: str, parent: str, tool: str, trace: str = "ab" * 16) -> SpanRecord:
    return span_record(
        trace_id=_fresh(trace),
        span_id=_fresh(span_id),
        parent_span_id=_fresh(parent),
        name=_fresh(f"execute_tool {tool}"),
        kind="tool_call",
        start_unix_nano=1,
        end_unix_nano=2,
        error=False,
        agent_name=_fresh("agent"),
        tool_name=_fresh(tool),
        model=_fresh("gpt-4o"),
        provider=_fresh("openai"),
        service_name=_fresh("svc"),
    )


def test_a_traces_records_share_the_strings_that_repeat_and_keep_their_values() -> None:
    assembler = Assembler()
    first, sibling = _record("01" * 8, "00" * 8, "search"), _record("02" * 8, "00" * 8, "search")
    other_tool, parent = _record("03" * 8, "00" * 8, "read"), _record("00" * 8, "ff" * 8, "delegate")
    assert first.trace_id is not sibling.trace_id and first.name is not sibling.name
    assembler.add("t", first)
    assembler.extend([("t", sibling, 10), ("t", other_tool, 10), ("t", parent, 10)])
    for field in ("trace_id", "parent_span_id", "name", "agent_name", "tool_name", "model", "provider", "service_name"):
        assert getattr(sibling, field) is getattr(first, field), field
    assert other_tool.trace_id is first.trace_id and other_tool.parent_span_id is first.parent_span_id
    assert other_tool.name == "execute_tool read" and other_tool.tool_name == "read"
    assert parent.span_id is other_tool.parent_span_id  # its children named it first
    assert parent.parent_span_id == "ff" * 8 and parent.name == "execute_tool delegate"
    assert [r.span_id for r in assembler.pop("t").records] == ["01" * 8, "02" * 8, "03" * 8, "00" * 8]


def test_records_of_different_traces_share_nothing() -> None:
    assembler = Assembler()
    a, b = _record("01" * 8, "00" * 8, "search"), _record("02" * 8, "00" * 8, "search", trace="cd" * 16)
    assembler.add("a", a)
    assembler.add("b", b)
    assert b.trace_id == "cd" * 16 and b.name is not a.name
