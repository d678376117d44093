"""What a learned critic's trained head adds over an untrained one, on the rollouts a fidelity run measured.

    python scripts/research/untrained_head.py docs/results/fidelity/long_turn_critic_step30 \
        --out docs/results/fidelity/long_turn_critic_step30/untrained_head

An untrained head (V = 0) gives the turn critic's credit with every value zero: GAE over the turns of the
stored rewards alone (`credit.critic.turn_gae`, γ and λ as given), whitened over each question's group: the
method's form when the step-30 table was measured (`credit.whiten=group`; it reproduces long_base's stored
`turn_critic` column, an untrained head at the base policy, to 2e-7). This script computes that credit for every
stored rollout and measures it as the instrument measures a method (`fidelity.summary.method_figures`: the same 95%
bootstrap draws over questions), beside the trained head's stored column, with the paired difference of their
within-rollout ρ (trained − untrained, on the same draws). It writes untrained_head.json and untrained_head.md
into `--out`; it needs no model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from agentcredit.credit.critic import turn_gae, whiten_turns
from agentcredit.fidelity import metrics as M
from agentcredit.fidelity.summary import TurnTable, fmt, json_ready, method_figures, read_records, within_statistic
from agentcredit.records import atomic_write_bytes

UNTRAINED = "untrained_head"


def untrained_credit(rewards: list[float], lengths: list[int], gamma: float, lam: float) -> list[list[float]]:
    """One group's V = 0 credit: each rollout's GAE over its `lengths[i]` actions with the reward at its last,
    whitened over the group's actions (all 0 when they do not vary)."""
    gae = [turn_gae(torch.zeros(n, dtype=torch.float64), reward, gamma, lam) for reward, n in zip(rewards, lengths)]
    return [a.tolist() for a in whiten_turns(gae)]


def with_untrained(records: list[dict], gamma: float, lam: float) -> list[dict]:
    """`records` with the untrained head's credit added to every rollout as the method `UNTRAINED`."""
    out = []
    for record in records:
        group_credit = untrained_credit([r["reward"] for r in record["rollouts"]],
                                        [len(r["truth"]) for r in record["rollouts"]], gamma, lam)
        rollouts = [{**r, "credit": {**r["credit"], UNTRAINED: c}} for r, c in zip(record["rollouts"], group_credit)]
        out.append({**record, "methods": [*record["methods"], UNTRAINED], "rollouts": rollouts})
    return out


def compare_heads(records: list[dict], trained: str, n_boot: int = 1000, seed: int = 0, threshold: float = 0.25) -> dict:
    """Both heads' figures and the paired within-rollout ρ difference, trained − untrained."""
    table = TurnTable.from_records(records)
    draws = M.bootstrap_draws(table.n_questions, n_boot, seed)  # the draws `summarise` uses for the same seed
    everywhere = np.ones(len(table.truth), dtype=bool)
    a, b = within_statistic(table, trained)(everywhere), within_statistic(table, UNTRAINED)(everywhere)
    difference = M.resampled_interval(lambda idx, copy: a(idx, copy) - b(idx, copy), table.question, draws)
    return {
        "n_questions": table.n_questions, "n_turns": int(len(table.truth)), "bootstrap": n_boot, "seed": seed,
        "methods": {label: method_figures(table, label, draws, threshold, None) for label in (trained, UNTRAINED)},
        "within_rho_trained_minus_untrained": difference,
    }


def markdown(result: dict, trained: str, source: str) -> str:
    rows = ["| credit | within-rollout ρ | mean per-rollout ρ (rollouts) | pooled ρ |", "|---|---|---|---|"]
    for label, name in ((trained, f"{trained}, trained head (stored)"), (UNTRAINED, "untrained head (V = 0)")):
        f = result["methods"][label]
        rows.append(f"| {name} | {fmt(f['within_rho'])} | {fmt(f['rollout_rho'])} "
                    f"({f['counts']['rollouts_ranked']}) | {fmt(f['pooled_rho'])} |")
    setting = result["setting"]
    return (f"Untrained head against the stored `{trained}` column of `{source}`: {result['n_questions']} questions, "
            f"{result['n_turns']} turns; V = 0 credit with γ = {setting['gamma']:g}, λ = {setting['lam']:g}, whitened "
            f"over each group; 95% bootstrap intervals over questions "
            f"({result['bootstrap']} draws, seed {result['seed']}).\n\n" + "\n".join(rows) +
            f"\n\nWithin-rollout ρ, trained − untrained (paired, same draws): "
            f"{fmt(result['within_rho_trained_minus_untrained'])}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a fidelity output folder (holds turns.jsonl)")
    parser.add_argument("--out", type=Path, required=True, help="folder for untrained_head.json and untrained_head.md")
    parser.add_argument("--method", default="turn_critic", help="the stored column of the trained head")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lam", type=float, default=0.9)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    if not 0 <= args.gamma <= 1 or not 0 <= args.lam <= 1:
        parser.error(f"--gamma and --lam must lie in [0, 1], got {args.gamma} and {args.lam}")
    if args.bootstrap < 1:
        parser.error(f"--bootstrap must be at least 1, got {args.bootstrap}")
    turns = args.folder / "turns.jsonl"
    if not turns.is_file():
        parser.error(f"{turns} is not a file (scripts/credit_fidelity.py writes turns.jsonl into its output folder)")
    records = read_records(turns)
    if not any(rollout["truth"] for record in records for rollout in record["rollouts"]):
        parser.error(f"{turns} holds no complete record with a turn")
    if args.method not in records[0]["methods"]:
        parser.error(f"{turns} has no column {args.method!r}; it has {', '.join(records[0]['methods'])}")
    result = compare_heads(with_untrained(records, args.gamma, args.lam), args.method, args.bootstrap)
    result["setting"] = {"gamma": args.gamma, "lam": args.lam, "source": str(turns)}
    text = markdown(result, args.method, str(turns))
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.out / "untrained_head.json", (json.dumps(json_ready(result), indent=1) + "\n").encode())
    atomic_write_bytes(args.out / "untrained_head.md", text.encode())
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
