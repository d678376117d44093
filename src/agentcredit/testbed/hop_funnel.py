"""Where a rollout's chain of hops breaks, on the synthetic world's bridge questions.

    python scripts/evaluate.py split=val n=200 oracle_queries=true     # adds "hop_funnel" to the line

A question of n hops is read hop by hop: search the hop's entity (the question's, then the name the
hop before read), see the page line that states the hop's fact, then copy that fact into the plan
note (`testbed/notes.py`; only when the policy writes plan notes) or, on the last hop, answer its
value. `oracle_queries` says how many of the oracle's searches a rollout issued; this says at which
stage of which hop it first went wrong, so that a base policy's missing success can be put where it
is lost (a first search, a misread page line, a copy) instead of guessed at.

Each stage is judged on the rollout's text, in the order above, and a rollout stops being followed at
its first failed stage: "reached" counts the rollouts that passed every stage before it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

from agentcredit.agent.trajectory import Trajectory
from agentcredit.testbed.notes import fact_note
from agentcredit.testbed.oracle_queries import searched_queries
from agentcredit.world.sentences import RELATIONS, parse_fact
from agentcredit.world.types import Question

_PAGE_LINE = re.compile(r"^L\d+: (.*)$", re.MULTILINE)
STAGES = ("searched", "saw", "copied", "answered")  # the order a hop is read in


def hop_chain(question: Question, oracle_searches: Sequence[str]) -> list[tuple[str, str, str]]:
    """(entity searched, relation, value read) of each hop, from the oracle's searches: hop i's entity is
    the oracle's i-th search and its value the next search (the last hop's value is the answer). [] for
    a question that is not a chain of hops, or whose oracle searched anything else in between."""
    program = (question.meta or {}).get("program") or []
    relations = [op["rel"] for op in program if op.get("op") == "hop"]
    if not relations or len(oracle_searches) != len(relations):
        return []
    values = [*oracle_searches[1:], question.answer]
    return list(zip(oracle_searches, relations, values))


def saw_fact(observations: Sequence[str], relation: str, value: str) -> bool:
    """Whether some page line shown to the policy (an open or a find result) states `relation` = `value`."""
    return any((fact := parse_fact(relation, line)) is not None and fact[0] == value
               for observation in observations for line in _PAGE_LINE.findall(observation))


def hop_stages(trajectory: Trajectory, chain: Sequence[tuple[str, str, str]], copies: bool) -> list[tuple[str, bool]]:
    """The stages a rollout went through, as ("<hop>/<hops> <stage>", passed), up to its first failure."""
    searched = set(searched_queries(trajectory))
    written = "\n".join(trajectory.turn_texts)
    stages = []
    for i, (entity, relation, value) in enumerate(chain):
        last = i == len(chain) - 1
        checks = [("searched", entity in searched), ("saw", saw_fact(trajectory.observations, relation, value))]
        if last:
            checks.append(("answered", (trajectory.answer or "").strip() == value))
        elif copies:
            checks.append(("copied", fact_note(RELATIONS[relation].cue, value) in written))
        for stage, passed in checks:
            stages.append((f"{i + 1}/{len(chain)} {stage}", passed))
            if not passed:
                return stages
    return stages


def reading_order(stage: str) -> tuple[int, int, int]:
    """Sort key of "<hop>/<hops> <stage>": shorter chains first, then hop by hop, stage by stage."""
    hops, name = stage.split()
    hop, of = hops.split("/")
    return int(of), int(hop), STAGES.index(name)


def hop_funnel(trajectories: Sequence[Trajectory], questions: Sequence[Question], oracle_searches: Sequence[Sequence[str]],
               copies: bool) -> dict:
    """`stages`: {"<hop>/<hops> <stage>": [passed, reached]} in reading order; `first_failure`: how many
    rollouts first failed at each stage ("none": every stage passed); `chains`: rollouts whose question is
    a chain of hops (the others are left out). `copies`: judge the plan note's copy of each fact."""
    reached, passed, failures, chains = Counter(), Counter(), Counter(), 0
    for trajectory, question, searches in zip(trajectories, questions, oracle_searches):
        chain = hop_chain(question, searches)
        if not chain:
            continue
        chains += 1
        stages = hop_stages(trajectory, chain, copies)
        for stage, ok in stages:
            reached[stage] += 1
            passed[stage] += ok
        failures[next((stage for stage, ok in stages if not ok), "none")] += 1
    ordered = sorted(reached, key=reading_order)
    return {"stages": {s: [passed[s], reached[s]] for s in ordered},
            "first_failure": dict(failures.most_common()), "chains": chains}
