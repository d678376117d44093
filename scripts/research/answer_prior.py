"""Success without reading, as one JSON line: guess each held-out question's answer from the training
answers of the same kind (what the question asks for), by mode and by sampling.

    python scripts/research/answer_prior.py                        # val split, first 200 questions (as evaluate.py split=val n=200)
    python scripts/research/answer_prior.py --split test --n 0     # the whole test split
Extra Hydra overrides go after `--`, e.g. `-- data.world.seed=3`. No model is built.
"""

import argparse
import json
import sys

from agentcredit.common.configs import compose_config, plain
from agentcredit.lit.datamodule import QuestionDataModule
from agentcredit.testbed.answer_prior import answer_prior, asked_for


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="val", choices=["val", "test"])
    parser.add_argument("--n", type=int, default=200, help="first n questions of the split; 0 = all")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.n < 0:
        parser.error(f"--n must be >= 0, got {args.n}")
    cfg = compose_config(args.overrides)
    datamodule = QuestionDataModule.from_config(plain(cfg.data), seed=cfg.seed)
    questions = datamodule.split_questions(args.split)
    questions = questions[: args.n] if args.n else questions
    if not any(asked_for(q) for q in questions):
        parser.error("these questions have no program (data.questions_path?): the answer prior needs synthetic questions")
    result = {"split": args.split, **answer_prior(datamodule.split_questions("train"), questions)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
