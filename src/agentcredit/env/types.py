"""The environment's types: the pages it serves (`Document`) and the action its tools take (`ToolCall`),
which the policy's parsed tool calls and the oracle both hand to BrowserEnv."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TOOL_NAMES = ("browser.search", "browser.open", "browser.find")


@dataclass(frozen=True)
class ToolCall:
    name: str  # one of TOOL_NAMES; anything else gets an error observation from BrowserEnv.step
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Document:
    """One page of the closed corpus. `lines` are shown to the agent numbered from 0."""

    id: str
    title: str
    url: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)
