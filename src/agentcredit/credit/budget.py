"""Group size beyond ``rollout.group_size``: the group-size knobs every credit method takes, and budget-matched
GRPO (ProVer section 4 and Appendix A.3, Table 4), which is GRPO with them.

    python train.py credit=budget-grpo credit.extra_rollouts=2
    python train.py credit=budget-grpo credit.match_metrics=outputs/runs/<prover run>/metrics.csv

Each group gets ``extra_rollouts`` more rollouts (default 0), so the policy samples about as many tokens per step
as a ProVer run spends on its boundary continuations. ``credit=budget-grpo`` (conf/credit/budget-grpo.yaml) is
``credit=grpo`` with ``extra_rollouts: 2``; it is not a credit method of its own. The orchestrator reads the
knobs (``lit.credit_inputs.extra_rollout_phases``) and widens the groups, whatever the method.

ProVer matches its runs' realised budget with two phase-specific group sizes over 100 steps. Here one number holds
for the whole run, given (``extra_rollouts``) or derived from a ProVer run's logged ``credit/extra_tokens`` and
``credit/group_tokens`` (``matched_extra_rollouts``), unless ``match_phases`` > 1: the ProVer run's logged steps are
then cut into that many near-equal phases (numpy's array_split), each phase matched on its own, and this run takes
phase p's number from that phase's first step on (``matched_phases``, ``extra_rollouts_at``). A ProVer run's
continuations get cheaper as its policy improves (on the long preset about 2 rollouts' worth a group over its first
100 steps, under 1 over steps 300-500), so over a long run one number overspends late and underspends early.

    python train.py credit=budget-grpo credit.match_metrics=<prover run>/metrics.csv credit.match_phases=5

Departures: that derivation matches
tokens, where ProVer matches the number of rollouts: a continuation starts mid-rollout and is shorter than a
rollout, so it adds fewer rollouts than counting continuations would. And ``credit=budget-grpo`` keeps GRPO's
σ-scaled advantage, where ProVer's control uses its eq. 1, R − mean R (``credit.outcome_scale=none``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentcredit.credit.knobs import KnobCheck, integer, optional_path

# Knobs of every credit config, with their defaults: read by the orchestrator, not by an advantage function.
GROUP_KNOBS = {"extra_rollouts": 0, "match_metrics": None, "match_phases": 1}
GROUP_CHECKS: dict[str, KnobCheck] = {
    "extra_rollouts": integer(0),
    "match_metrics": optional_path("null (use extra_rollouts) or the metrics.csv of a ProVer run"),
    "match_phases": integer(1),
}


def matched_extra_rollouts(extra_tokens: Sequence[float], group_tokens: Sequence[float], group_size: int) -> int:
    """Extra rollouts per group that cost what the continuations did.

    extra_tokens, group_tokens: a ProVer run's per-step means over groups of the continuation tokens and
    of the G rollouts' own policy tokens. One rollout costs mean(group_tokens)/G tokens, so the answer
    is round(mean(extra_tokens) / (mean(group_tokens) / G))."""
    if len(extra_tokens) == 0 or len(extra_tokens) != len(group_tokens):
        raise ValueError(f"need one extra_tokens and group_tokens value per step, got {len(extra_tokens)} "
                         f"and {len(group_tokens)}")
    if not all(math.isfinite(v) for v in (*extra_tokens, *group_tokens)):
        raise ValueError("the ProVer run logged a credit/extra_tokens or credit/group_tokens that is not a finite number")
    per_rollout = sum(group_tokens) / len(group_tokens) / group_size
    if per_rollout <= 0:
        raise ValueError("the ProVer run's rollouts generated no policy tokens; cannot match its budget")
    return int(round(sum(extra_tokens) / len(extra_tokens) / per_rollout))


def matched_phases(steps: Sequence[int], extra_tokens: Sequence[float], group_tokens: Sequence[float], group_size: int,
                   phases: int) -> list[tuple[int, int]]:
    """[(first step, extra rollouts)] of each phase: the ProVer run's logged steps (ascending, one extra_tokens and
    group_tokens value each) cut into `phases` near-equal runs of consecutive steps, larger first, each matched by
    ``matched_extra_rollouts`` on its own steps; the first phase starts at step 0."""
    import numpy as np

    if not len(steps) == len(extra_tokens) == len(group_tokens):
        raise ValueError(f"need one step, extra_tokens and group_tokens value each, got {len(steps)}, "
                         f"{len(extra_tokens)} and {len(group_tokens)}")
    if phases > len(steps):
        raise ValueError(f"credit.match_phases={phases} is more than the {len(steps)} steps the ProVer run logged")
    cuts = np.array_split(np.arange(len(steps)), phases)
    out = []
    for i, index in enumerate(cuts):
        first = 0 if i == 0 else int(steps[index[0]])
        out.append((first, matched_extra_rollouts([extra_tokens[j] for j in index], [group_tokens[j] for j in index],
                                                  group_size)))
    return out


def extra_rollouts_at(schedule: Sequence[tuple[int, int]], step: int) -> int:
    """The extra rollouts of the phase that `step` falls in (the last phase whose first step is <= step)."""
    return next(n for first, n in reversed(schedule) if first <= step)
