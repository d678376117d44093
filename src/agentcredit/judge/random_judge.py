"""`judge=random`: ProVer's random-segment ablation (section 5.3, Appendix A.3).

    python train.py credit=prover judge=random

mode=paper (default) follows the appendix: a start turn uniform over the chosen rollout's recorded
turns (the final answer turn included) and a length uniform in 1..max_segment_turns; a draw that
breaks the validity rules is discarded and the group keeps plain GRPO credit (``correct`` refuses, so
no correction turn redraws it). mode=valid draws uniformly among the valid segments only, which is
the same distribution conditioned on validity, so every eligible group gets verified.
Draws come from one generator seeded by ``seed``, so a run is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from agentcredit.judge.base import JudgeError, Proposal
from agentcredit.judge.context import JudgeContext

MODES = ("paper", "valid")


@dataclass
class RandomJudge:
    seed: int = 0
    mode: str = "paper"
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"judge.mode={self.mode!r} is not known; use one of {list(MODES)}")
        self._rng = random.Random(int(self.seed))

    def propose(self, context: JudgeContext) -> Proposal:
        expert, max_len = context.expert, context.max_segment_turns
        if self.mode == "paper":
            start = self._rng.randrange(len(expert.turns)) if expert.turns else 0
            length = self._rng.randint(1, max_len)
            return Proposal(start, start + length - 1, "random draw (start and length uniform)")
        # Valid segments: end at T−1 or earlier, at most max_len turns.
        num_tool_turns = expert.num_tool_turns
        segments = [(s, e) for s in range(num_tool_turns) for e in range(s, min(s + max_len, num_tool_turns))]
        if not segments:
            raise JudgeError("the chosen rollout has no tool turn, so there is no valid segment to draw")
        start, end = self._rng.choice(segments)
        return Proposal(start, end, "random draw among valid segments")

    def correct(self, context: JudgeContext, previous: Proposal, reason: str) -> Proposal:
        if self.mode == "paper":
            raise JudgeError(f"random draw discarded as in the paper's ablation: {reason}")
        return self.propose(context)
