"""TRACE's premise on a base policy, measured: mean δ on the turn whose observation first shows the
gold answer against the mean δ of every other tool turn, over held-out rollouts (one JSON line).

    python scripts/research/readiness.py --n 200                  # the shipped tiny base policy, val split
    python scripts/research/readiness.py --n 50 -- model.hidden_size=64   # any Hydra override after --

δ_k = log(d_k / d_{k+1}), d_k = −ℓ̄_k + ε (TRACE eq. 7, ε = 0.1), with ℓ̄_k scored by the policy itself,
as the frozen reference of an RL run scores it (after the testbed's answer note). The counts and
standard errors say how far apart the two means are in units of their uncertainty.
"""

import argparse
import json
import sys
import time

from agentcredit.run.compose import build_components
from agentcredit.common.configs import compose_config
from agentcredit.run.evaluate import rollout_questions
from agentcredit.testbed.readiness import readiness
from agentcredit.testbed.report import reference_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="val", choices=["val", "test"])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.n < 1 or not args.eps > 0:
        parser.error("--n must be >= 1 and --eps > 0")
    start = time.time()
    components = build_components(compose_config(args.overrides))
    questions = list(components.datamodule.split_questions(args.split))[: args.n]
    trajectories = rollout_questions(components, questions, args.temperature, seed=args.seed)
    scores = reference_scores(components.policy, components.chat, trajectories, questions)
    result = readiness(scores, [t.observations for t in trajectories], [q.answer for q in questions], args.eps)
    print(json.dumps({"split": args.split, "n": len(questions), **result, "seconds": round(time.time() - start, 1)}))


if __name__ == "__main__":
    sys.exit(main())
