"""The `agentcredit` command: one way in to every user command, each a subcommand.

    agentcredit --help                  # the subcommands, one line each
    agentcredit train credit=trace      # the same as python train.py credit=trace
    agentcredit <subcommand> --help     # a subcommand's own options

Each subcommand's code is a module of this package; `python train.py` and `python scripts/<x>.py` are thin
wrappers of the same modules. The Hydra subcommands (train, evaluate, fidelity) share one start-up
(`hydra_start.run_hydra_command`); the others parse their own options.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple


class Subcommand(NamedTuple):
    module: str  # agentcredit.cli.<module>, whose main(argv) runs it
    summary: str  # its line in `agentcredit --help`
    hydra: bool = False  # Hydra overrides: main(argv, program) so that reruns (DDP workers, resume) name it


SUBCOMMANDS = {
    "train": Subcommand("train", "train a policy (Hydra overrides; the same as python train.py)", hydra=True),
    "evaluate": Subcommand("evaluate", "a policy's accuracy, format and tool use on held-out questions", hydra=True),
    "fidelity": Subcommand("credit_fidelity", "each method's turn credit against Monte Carlo ground truth", hydra=True),
    "compare": Subcommand("compare", "a comparison's tables, verdicts and learning curves from sweep folders"),
    "view": Subcommand("view_credit", "credit_view.html: a run's trajectories turn by turn with their credit"),
    "plot": Subcommand("plot_run", "learning curves of a run or a sweep, one PNG per metric"),
    "restore": Subcommand("restore_sweep", "give a sweep folder its finished jobs back from committed summaries"),
    "carry": Subcommand("carry", "carry a sweep's unfinished jobs (last checkpoint, logs) to a fresh checkout and back"),
    "progress": Subcommand("progress", "how far a sweep has come and about how many job-hours of training are left"),
    "base-policy": Subcommand("build_base_policy", "build the tiny testbed's base policy (resumable)"),
    "bench": Subcommand("bench", "a benchmark of the checkout's benchmarks/ folder (step, rollout, env, ...)"),
}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = [f"  {name:<{width}}  {command.summary}" for name, command in SUBCOMMANDS.items()]
    return ("usage: agentcredit <subcommand> [arguments]\n\n"
            "Turn-level credit assignment for LLM search agents trained with RL.\n\nsubcommands:\n"
            + "\n".join(lines) + "\n\n`agentcredit <subcommand> --help` gives a subcommand's own arguments.")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"agentcredit: no subcommand {name!r}; one of: {', '.join(SUBCOMMANDS)}", file=sys.stderr)
        return 2
    command = SUBCOMMANDS[name]
    module = importlib.import_module(f"agentcredit.cli.{command.module}")
    if command.hydra:
        module.main(rest, program=[sys.argv[0], name])
        return 0
    sys.argv = [f"agentcredit {name}", *rest]  # argparse names the subcommand in its usage and errors
    return int(module.main(rest) or 0)
