"""SPO-chain's boundary values for one prompt group, with ProVer's restore-and-continue machinery.

    chains, logs = measure_chains(trajectories, question, worker, run_knobs)   # called by lit.credit_inputs

In an eligible group (ProVer's rule, success rate strictly in (low, high)) every successful rollout
is cut by ``credit.spo.chain_boundaries``; K continuations from each internal boundary S_b (the
environment restored from the snapshot, the token prefix kept: ``RolloutWorker.continue_from_many``,
as ``judge.verification`` does for ProVer) give V_b = their mean terminal reward. The boundaries of
one rollout are sampled in one batch. Continuations only feed the values; they never enter
the training batch.

Logs (floats, averaged over the groups that report them, as ProVer's): every group: eligible,
group_tokens, extra_tokens; eligible groups: chained (successful rollouts measured), chain_value
(mean of the internal values), time/verify_s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from agentcredit.agent.trajectory import Trajectory, generated_tokens
from agentcredit.credit.group import ChainValues
from agentcredit.credit.prover import is_eligible
from agentcredit.credit.spo import SPO_RUN_KNOBS
from agentcredit.credit.spo import chain_boundaries
from agentcredit.world.types import Question

DEFAULT_KNOBS = SPO_RUN_KNOBS  # registered with credit=spo-chain


def measure_chains(trajectories: list[Trajectory], question: Question, worker, run_knobs: Mapping
                   ) -> tuple[tuple[ChainValues, ...], dict]:
    knobs = {**DEFAULT_KNOBS, **run_knobs}
    rewards = [t.reward for t in trajectories]
    threshold = float(knobs["success_threshold"])
    logs = {"eligible": 0.0, "extra_tokens": 0.0, "group_tokens": float(sum(t.num_policy_tokens for t in trajectories))}
    if not is_eligible(rewards, knobs["eligible_low"], knobs["eligible_high"], threshold):
        return (), logs
    t0 = time.perf_counter()
    k = int(knobs["num_continuations"])
    measured = [(g, chain_boundaries(t.num_tool_turns, int(knobs["max_segments"])))
                for g, t in enumerate(trajectories) if t.reward >= threshold]
    measured = [(g, cuts) for g, cuts in measured if cuts]  # a success without tool turns is one segment
    chains, extra, values = [], 0, []
    for g, cuts in measured:
        continuations = worker.continue_from_many(trajectories[g], cuts, question, k)  # [len(cuts)][k]
        means = tuple(sum(c.reward for c in batch) / len(batch) for batch in continuations)
        extra += sum(generated_tokens(c) for batch in continuations for c in batch)
        chains.append(ChainValues(g, tuple(cuts), means))
        values.extend(means)
    logs.update(eligible=1.0, chained=float(len(chains)), extra_tokens=float(extra),
                **({"chain_value": sum(values) / len(values)} if values else {}),
                **{"time/verify_s": time.perf_counter() - t0})
    return tuple(chains), logs
