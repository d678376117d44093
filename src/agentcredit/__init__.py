"""agentcredit: turn-level credit assignment for LLM search agents (GRPO, TRACE, ProVer)."""

__version__ = "0.1.0"
