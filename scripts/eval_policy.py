"""Success of the base (or a saved) policy on held-out questions, one rollout each, as one JSON line,
beside the answer prior of the same questions (success without reading: testbed/answer_prior.py).

    python scripts/eval_policy.py --model tiny --split val --n 200
    python scripts/eval_policy.py --model smollm2_135m --split val --n 20
    python scripts/eval_policy.py --oracle-queries   # + how often rollouts search what the oracle searches
Extra Hydra overrides go after `--`, e.g. `-- rollout.max_tool_turns=12`.
"""

import argparse
import json
import sys
import time

from agentcredit.compose import build_components
from agentcredit.configs import compose_config
from agentcredit.evaluate import oracle_query_agreement, rollout_questions, summarise
from agentcredit.testbed.answer_prior import answer_prior


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--split", default="val", choices=["train", "val", "test"])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--oracle-queries", action="store_true",
                        help="also report how often the rollouts search what the oracle searches (synthetic questions only)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    cfg = compose_config([f"model={args.model}", *args.overrides])
    components = build_components(cfg)
    questions = list(components.datamodule.split_questions(args.split))[: args.n]
    if args.oracle_queries and not all((q.meta or {}).get("program") for q in questions):
        parser.error("--oracle-queries needs synthetic questions: the oracle cannot solve questions from data.questions_path")
    start = time.time()
    trajectories = rollout_questions(components, questions, args.temperature, seed=args.seed)
    result = {"model": args.model, "split": args.split, **summarise(trajectories, questions),
              "temperature": args.temperature, "seconds": round(time.time() - start, 1)}
    if all((q.meta or {}).get("program") for q in questions):
        prior = answer_prior(components.datamodule.split_questions("train"), questions)
        result["answer_prior"] = {k: prior[k] for k in ("mode_success", "sampled_success")}
    if args.oracle_queries:
        result["oracle_queries"] = oracle_query_agreement(trajectories, questions, components.env_factory,
                                                          topn=cfg.warmstart.search_topn)
    if components.base_policy_info:
        result["base_policy"] = components.base_policy_info
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
