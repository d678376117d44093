"""ProVer segment judges: random, heuristic, OpenAI-compatible and local agentic judges.

    judge = build_judge(cfg.judge)          # conf/judge/<kind>.yaml
    proposal = judge.propose(context)       # context: judge.context.build_judge_context(...)
"""

from agentcredit.judge.agentic import AgenticJudge, AssistantTurn, ToolCallRequest
from agentcredit.judge.base import Judge, JudgeError, Proposal, parse_proposal
from agentcredit.judge.context import JudgeContext, RolloutView, TurnView, build_judge_context, rollout_view
from agentcredit.judge.factory import build_judge
from agentcredit.judge.heuristic import HeuristicJudge
from agentcredit.judge.random_judge import RandomJudge

__all__ = [
    "AgenticJudge",
    "AssistantTurn",
    "HeuristicJudge",
    "Judge",
    "JudgeContext",
    "JudgeError",
    "Proposal",
    "RandomJudge",
    "RolloutView",
    "ToolCallRequest",
    "TurnView",
    "build_judge",
    "build_judge_context",
    "parse_proposal",
    "rollout_view",
]
