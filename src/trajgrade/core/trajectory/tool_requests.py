"""Tool calls joined to the model calls that requested them, by tool-call id, else by name in request order.

A tool span without arguments then takes the requested ones (``content.tool_call``), and the run's summary
lists the requests no tool span ran and the tool calls no model call requested.
"""

from __future__ import annotations

from trajgrade.core.trajectory.content import Request
from trajgrade.core.trajectory.normalize import SpanRecord

__all__ = ["ToolRequests"]


class ToolRequests:
    """The requests of a run's model calls, and the tool spans that ran them.

    Tool spans are taken in start order, so a request is asked before the tools that run it are taken."""

    __slots__ = ("asked", "by_id", "by_name", "matched", "unrequested")

    def __init__(self) -> None:
        self.asked: list[tuple[Request, int]] = []  # every requested call and its turn, in request order
        self.by_id: dict[str, list[int]] = {}
        self.by_name: dict[str, list[int]] = {}
        self.matched: set[int] = set()
        self.unrequested: list[str] = []

    def ask(self, calls: tuple[Request, ...], turn: int) -> None:
        for call in calls:
            i = len(self.asked)
            self.asked.append((call, turn))
            if call[0] is not None:
                self.by_id.setdefault(call[0], []).append(i)
            if call[1] is not None:
                self.by_name.setdefault(call[1], []).append(i)

    def take(self, r: SpanRecord, turn: int) -> tuple[Request | None, int]:
        """The request a tool span executes, and its turn (``turn`` when it has none)."""
        found: int | None = None
        if r.tool_call_id is not None:
            # ids are unique only per response with some providers: the latest request not yet run, else the latest
            asked = self.by_id.get(r.tool_call_id)
            if asked:
                found = next((i for i in reversed(asked) if i not in self.matched), asked[-1])
        elif r.tool_name is not None:
            queue = self.by_name.get(r.tool_name)
            while queue and queue[0] in self.matched:
                queue.pop(0)
            found = queue[0] if queue else None
        if found is None:
            if self.asked:
                self.unrequested.append(r.tool_name or r.name)
            return None, turn
        self.matched.add(found)
        call, asked_turn = self.asked[found]
        return call, asked_turn

    def not_run(self) -> tuple[str, ...]:
        """The requested calls no tool span ran (tool names, else ids), in request order."""
        return tuple(call[1] or call[0] or "?" for i, (call, _) in enumerate(self.asked) if i not in self.matched)
