"""`agentcredit fidelity` (and `python scripts/credit_fidelity.py`): how right is each method's turn credit? Every method's credit against Monte Carlo ground truth.

    python scripts/credit_fidelity.py                                         # conf/fidelity.yaml's defaults
    python scripts/credit_fidelity.py n=32 group_size=8 mc=16 methods=[grpo,trace,trace_k0,prover_heuristic,gigpo]
    python scripts/credit_fidelity.py ckpt_path=outputs/runs/<run>/checkpoints/last.ckpt   # a trained policy
    python scripts/credit_fidelity.py export=docs/results/fidelity/<name>    # and copy the results there
    python scripts/credit_fidelity.py from_turns=docs/results/fidelity/<name>  # its reports again, no model
    python scripts/credit_fidelity.py add_to=docs/results/fidelity/<name> methods=[m1,m2] <its overrides>  # new methods

For n questions of the split, G rollouts of the policy; M continuations from every state a rollout acted
from give V̂(S_k) and the ground-truth advantage A* of each turn (agentcredit.fidelity.ground_truth); every
method listed gives its turn credit on the same rollouts through the path training takes
(agentcredit.fidelity.methods; a method whose credit depends on the whole training step, turn-critic's
whitening over the batch, over steps of data.prompts_per_step questions, so n must be a multiple of it).
Writes into the Hydra run folder turns.jsonl (one record per question, appended as each question or step
finishes: run again with hydra.run.dir=<folder> to finish an interrupted measurement),
fidelity.json (every figure with its 95% bootstrap interval over questions), fidelity.md (the table),
fidelity.png (credit against A*, one panel per method) and view/<method>/credit_samples.jsonl for
scripts/view_credit.py (with an A* column); prints the summary as one JSON line. A bad value, or an output
path that cannot be written (export= naming a file, say), is one line on stderr, before any model loads.
Records are read against agentcredit.records.fidelity's schemas: a damaged line of turns.jsonl (or one
cut short by a kill) is left out with one warning naming file and line, and a rerun measures it again.
`add_to=` adds methods to a finished measurement without measuring its ground truth again: its rollouts
are sampled again and must equal the stored ones (agentcredit.fidelity.adding says how).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from agentcredit.cli.hydra_start import run_hydra_command


def short_line(summary: dict) -> dict:
    """The printed line: sizes, the ceiling, and each method's pooled and within-rollout ρ."""
    def rounded(figure):
        return None if figure["value"] is None else round(figure["value"], 4)

    methods = {label: {k: rounded(f[k]) for k in ("pooled_rho", "within_rho", "sign_agreement")}
               for label, f in summary["methods"].items()}
    return {"n_questions": summary["n_questions"], "n_turns": summary["n_turns"], "success": round(summary["success"], 4),
            "within_reliability": rounded(summary["ceiling"]["within_reliability"]),
            "pooled_reliability": rounded(summary["ceiling"]["pooled_reliability"]), "methods": methods,
            "truth_seconds": round(summary["cost"]["truth"]["seconds"], 1)}


def fidelity_job(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from agentcredit.common.configs import ConfigError
    from agentcredit.fidelity import adding
    from agentcredit.fidelity.run import check_outputs, export, fidelity_config, measure, write_reports
    from agentcredit.fidelity.summary import read_config, read_records
    from agentcredit.records import RecordError
    from agentcredit.run.train import exit_on_one_line_error, load_env_file
    from agentcredit.world.user import UserDataError

    load_env_file()
    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        if cfg.get("from_turns"):
            folder = Path(cfg.from_turns)
            if not (folder / "turns.jsonl").is_file():
                raise ConfigError(f"from_turns: {folder}/turns.jsonl does not exist")
            check_outputs(folder)  # the reports are written back beside it
            records = read_records(folder / "turns.jsonl")
            if not records:
                raise UserDataError(f"from_turns: {folder}/turns.jsonl holds no readable record")
            config = read_config(folder / "fidelity.json")  # what was measured, kept with the regenerated figures
            summary = write_reports(records, folder, threshold=float(cfg.threshold), n_boot=int(cfg.bootstrap),
                                    config=config)
            print(json.dumps(short_line(summary)), flush=True)
            return
        overrides = list(hydra_cfg.overrides.task)
        cfg = fidelity_config(cfg, overrides)
        if cfg.get("add_to"):
            addition = adding.plan_addition(cfg.add_to, cfg)  # the folder checked before any model loads
            records = adding.add_methods(cfg, overrides, addition)
            if records is None:  # questions at or beyond n still lack the methods (said on stderr)
                return
            summary = write_reports(records, addition.folder, threshold=float(cfg.threshold),
                                    n_boot=int(cfg.bootstrap), config=adding.added_config(addition, overrides))
            adding.finish(addition)
            print(json.dumps(short_line(summary)), flush=True)
            return
        # every path written, checked before any model loads (not after the whole measurement)
        check_outputs(out_dir, cfg.get("export"), [str(m) for m in cfg.methods] if int(cfg.samples) else ())
        records, step = measure(cfg, overrides, out_dir)
        if not records:
            raise UserDataError(f"{out_dir}/turns.jsonl: no question gave a readable record; see the warnings above")
        summary = write_reports(records, out_dir, threshold=float(cfg.threshold), n_boot=int(cfg.bootstrap),
                                samples=int(cfg.samples), config={"overrides": overrides, "ckpt_path": cfg.ckpt_path,
                                                                  "n": int(cfg.n), "group_size": int(cfg.group_size),
                                                                  "mc": int(cfg.mc), "split": cfg.split},
                                step=step)
        if cfg.get("export"):
            export(out_dir, Path(cfg.export))
    except RecordError as err:  # a file that cannot be read at all: one line, as a data error
        exit_on_one_line_error(UserDataError(str(err)))
        raise
    except Exception as err:
        exit_on_one_line_error(err)
        raise
    print(json.dumps(short_line(summary)), flush=True)
    print(f"[agentcredit] credit fidelity: {out_dir}/fidelity.md", file=sys.stderr, flush=True)



def main(argv: Sequence[str] | None = None, program: Sequence[str] | None = None) -> None:
    run_hydra_command(fidelity_job, "fidelity", argv, program)
