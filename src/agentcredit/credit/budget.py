"""Budget-matched GRPO (ProVer section 4 and Appendix A.3, Table 4).

    python train.py credit=budget-grpo credit.extra_rollouts=2
    python train.py credit=budget-grpo credit.match_metrics=outputs/runs/<prover run>/metrics.csv

Outcome-only GRPO credit (eq. 1, the mean-centred form ProVer uses) on larger groups: each group gets
``extra_rollouts`` more rollouts, so the policy samples about as many tokens per step as a ProVer run
spends on its boundary continuations. The credit function is GRPO's own (registered a second time,
not copied); the orchestrator reads the run knob and widens the groups.

Departure: ProVer matches its runs' realised budget with two phase-specific group sizes over 100
steps; here one number holds for the whole run, either given or derived from a ProVer run's logged
``credit/extra_tokens`` and ``credit/group_tokens`` (``matched_extra_rollouts``).
"""

from __future__ import annotations

from collections.abc import Sequence


def matched_extra_rollouts(extra_tokens: Sequence[float], group_tokens: Sequence[float], group_size: int) -> int:
    """Extra rollouts per group that cost what the continuations did.

    extra_tokens, group_tokens: a ProVer run's per-step means over groups of the continuation tokens and
    of the G rollouts' own policy tokens. One rollout costs mean(group_tokens)/G tokens, so the answer
    is round(mean(extra_tokens) / (mean(group_tokens) / G))."""
    if len(extra_tokens) == 0 or len(extra_tokens) != len(group_tokens):
        raise ValueError(f"need one extra_tokens and group_tokens value per step, got {len(extra_tokens)} "
                         f"and {len(group_tokens)}")
    per_rollout = sum(group_tokens) / len(group_tokens) / group_size
    if per_rollout <= 0:
        raise ValueError("the ProVer run's rollouts generated no policy tokens; cannot match its budget")
    return int(round(sum(extra_tokens) / len(extra_tokens) / per_rollout))
