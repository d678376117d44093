"""Group size beyond ``rollout.group_size``: the group-size knobs every credit method takes, and budget-matched
GRPO (ProVer section 4 and Appendix A.3, Table 4), which is GRPO with them.

    python train.py credit=budget-grpo credit.extra_rollouts=2
    python train.py credit=budget-grpo credit.match_metrics=outputs/runs/<prover run>/metrics.csv

Each group gets ``extra_rollouts`` more rollouts (default 0), so the policy samples about as many tokens per step
as a ProVer run spends on its boundary continuations. ``credit=budget-grpo`` (conf/credit/budget-grpo.yaml) is
``credit=grpo`` with ``extra_rollouts: 2``; it is not a credit method of its own. The orchestrator reads the
knobs (``lit.credit_inputs.extra_rollouts``) and widens the groups, whatever the method.

Departures: ProVer matches its runs' realised budget with two phase-specific group sizes over 100
steps; here one number holds for the whole run, either given or derived from a ProVer run's logged
``credit/extra_tokens`` and ``credit/group_tokens`` (``matched_extra_rollouts``). That derivation matches
tokens, where ProVer matches the number of rollouts: a continuation starts mid-rollout and is shorter than a
rollout, so it adds fewer rollouts than counting continuations would. And ``credit=budget-grpo`` keeps GRPO's
σ-scaled advantage, where ProVer's control uses its eq. 1, R − mean R (``credit.outcome_scale=none``).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentcredit.credit.knobs import KnobCheck, integer, optional_path

# Knobs of every credit config, with their defaults: read by the orchestrator, not by an advantage function.
GROUP_KNOBS = {"extra_rollouts": 0, "match_metrics": None}
GROUP_CHECKS: dict[str, KnobCheck] = {
    "extra_rollouts": integer(0),
    "match_metrics": optional_path("null (use extra_rollouts) or the metrics.csv of a ProVer run"),
}


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
