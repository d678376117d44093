"""Whether the policy's features hold a state's value, as one JSON line: a turn critic's head fitted offline on
some questions' states and scored on others', against the critic trained online and a table by hop count and turn.

    python scripts/research/critic_probe.py --ckpt <turn-critic run>/checkpoints/last.ckpt --n 200 --samples 4
    python scripts/research/critic_probe.py --n 16 --samples 2 -- experiment=compare_long      # the base policy

Rolls out the policy (the checkpoint's, with its run's overrides; else the configured base policy) on the first
--n questions of --split, --samples rollouts each, and reads the policy's last hidden state at the last token of
every state S_k a rollout acted from, as the turn critic does (lit/critic.py). Each state's target is its Monte
Carlo return γ^{n−1−k} R (γ: the run's credit.gamma where it has one, else --gamma). Predictors are fitted on half
the questions and scored on the other half, both ways round (agentcredit.analysis.critic_probe); the figures are
explained variances over every state with 95% bootstrap intervals over questions:

- trained_head: the checkpoint's own critic head (a turn-critic run's), as it stood at the end of training;
- head_<k>: a head of the critic's shape (hidden → 64 → 1) after k full-batch Adam steps at --lr;
- ridge: ridge regression on the same features (--alpha);
- pooled_head_<k>, pooled_ridge: the same two on each state's hidden states averaged over all its tokens;
- hops_and_turn: the mean return of the other fold's states with the same hop count and turn index.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

HEAD_STEPS = (30, 100, 300, 1000, 3000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=None, help="a checkpoint written by train.py (default: the base policy)")
    parser.add_argument("--split", default="val", choices=["train", "val"], help="never test: the probe must not read it")
    parser.add_argument("--n", type=int, default=200, help="questions (the split's first n)")
    parser.add_argument("--samples", type=int, default=4, help="rollouts per question")
    parser.add_argument("--gamma", type=float, default=0.99, help="the return's discount where the run's credit has none")
    parser.add_argument("--lr", type=float, default=1e-3, help="the offline head's Adam step size")
    parser.add_argument("--alpha", type=float, default=10.0, help="ridge penalty on standardised features")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="rollouts, folds, heads and bootstrap")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    for name in ("n", "samples", "resamples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if not 0 < args.gamma <= 1 or args.lr <= 0 or args.alpha < 0:
        parser.error("--gamma must be in (0, 1], --lr positive, --alpha at least 0")
    torch.set_num_threads(args.threads)

    from omegaconf import OmegaConf

    from agentcredit.analysis.critic_probe import (
        StatePool, cell_means, cross_fitted, explained_with_interval, fit_head, monte_carlo_returns, pooled_at_boundaries,
        question_folds, ridge)
    from agentcredit.common.configs import compose_config
    from agentcredit.lit.critic import HEAD_WIDTH, TurnCritic, answered, load_trained_head
    from agentcredit.run.compose import build_components
    from agentcredit.run.evaluate import load_policy_weights, merge_overrides, rollout_questions, training_overrides

    cfg = compose_config(merge_overrides(training_overrides(args.ckpt), args.overrides))
    credit = OmegaConf.to_container(cfg.credit, resolve=True)
    gamma = float(credit["gamma"]) if credit.get("gamma") is not None else args.gamma
    components = build_components(cfg, progress=False, base_policy=not args.ckpt)
    if args.ckpt:
        load_policy_weights(components.policy, args.ckpt)
    questions = list(components.datamodule.split_questions(args.split))[: args.n]
    start = time.perf_counter()
    trajectories = rollout_questions(components, questions, float(components.rollout_cfg.temperature),
                                     seed=args.seed, samples=args.samples)
    rollout_s = time.perf_counter() - start
    rows = [q for q in questions for _ in range(args.samples)]

    hidden = components.policy.config.hidden_size
    critic = TurnCritic(hidden, lr=args.lr, epochs=1, gamma=gamma, gae_lambda=1.0)
    trained = None
    if credit.get("name") == "turn-critic" and args.ckpt:
        trained = load_trained_head(critic, args.ckpt)
    features = critic.boundary_features(components.policy.eval(), trajectories)
    decoder = components.policy.eval().get_decoder()
    parts = {"features": [], "pooled": [], "returns": [], "question": [], "hops": [], "turn": [], "trained": []}
    for t, q, f in zip(trajectories, rows, features):
        n = len(t.boundaries) if answered(t) else len(t.boundaries) - 1  # the states it acted from
        if n == 0:
            continue
        parts["features"].append(f[:n])
        with torch.no_grad():
            hidden_states = decoder(input_ids=torch.tensor([t.input_ids[: t.boundaries[n - 1]]])).last_hidden_state[0]
        parts["pooled"].append(pooled_at_boundaries(hidden_states, t.boundaries[:n]))
        parts["returns"].append(monte_carlo_returns(n, float(t.reward), gamma))
        parts["question"] += [q.id] * n
        parts["hops"] += [q.hops] * n
        parts["turn"] += list(range(n))
        parts["trained"].append(critic(f[:n]).detach().double())
    pool = StatePool(torch.cat(parts["features"]).double(), torch.cat(parts["returns"]), np.array(parts["question"]),
                     np.array(parts["hops"]), np.array(parts["turn"]))
    if float(pool.returns.var()) == 0 or len(set(pool.question.tolist())) < 4:
        raise SystemExit(f"critic_probe: {len(pool.returns)} states of {len(set(pool.question.tolist()))} questions, "
                         f"every return {float(pool.returns[0]) if len(pool.returns) else 0:g}: nothing to explain; "
                         "take more questions (--n) or a policy that sometimes succeeds")
    folds = question_folds(pool.question, args.seed)

    def predict(train, test):
        heads = fit_head(train, test, list(HEAD_STEPS), args.lr, HEAD_WIDTH, seed=args.seed)
        return {**{f"head_{k}": p for k, p in heads.items()}, "ridge": ridge(train, test, args.alpha),
                "hops_and_turn": cell_means(train, test)}

    predictions = cross_fitted(pool, folds, predict)
    pooled = StatePool(torch.cat(parts["pooled"]), pool.returns, pool.question, pool.hops, pool.turn)

    def predict_pooled(train, test):
        heads = fit_head(train, test, list(HEAD_STEPS), args.lr, HEAD_WIDTH, seed=args.seed)
        return {**{f"pooled_head_{k}": p for k, p in heads.items()}, "pooled_ridge": ridge(train, test, args.alpha)}

    predictions.update(cross_fitted(pooled, folds, predict_pooled))
    if trained is not None:
        predictions = {"trained_head": torch.cat(parts["trained"]), **predictions}
    explained = {}
    for name, values in predictions.items():
        point, low, high = explained_with_interval(values, pool, args.resamples, args.seed)
        explained[name] = [round(point, 4), round(low, 4), round(high, 4)]
    print(json.dumps({
        "ckpt": args.ckpt, "overrides": list(args.overrides), "trained_step": trained, "split": args.split, "questions": len(questions),
        "rollouts": len(trajectories), "states": len(pool.returns), "gamma": gamma,
        "reward_mean": round(sum(t.reward for t in trajectories) / len(trajectories), 4),
        "return_mean": round(float(pool.returns.mean()), 4), "return_var": round(float(pool.returns.var(correction=0)), 4),
        "explained_variance": explained, "rollout_s": round(rollout_s, 1),
    }), flush=True)


if __name__ == "__main__":
    main()
