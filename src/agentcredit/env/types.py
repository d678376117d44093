"""The action type the policy's parsed tool calls and the oracle both hand to BrowserEnv."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TOOL_NAMES = ("browser.search", "browser.open", "browser.find")


@dataclass(frozen=True)
class ToolCall:
    name: str  # one of TOOL_NAMES; anything else gets an error observation from BrowserEnv.step
    arguments: dict[str, Any] = field(default_factory=dict)
