"""Hydra entry point. python train.py credit=trace credit.K=3  (config groups: conf/, a link to src/agentcredit/conf; see README.md and docs/)."""

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

import agentcredit.run.sweep  # noqa: F401  (registers the resolver that names sweep job folders)
from agentcredit.common.configs import current_overrides, register_config_nodes
from agentcredit.checks.secret_check import refuse_secrets


CONFIG_PATH, CONFIG_NAME = "src/agentcredit/conf", "config"


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name=CONFIG_NAME)
def main(cfg: DictConfig) -> float:
    from agentcredit.run.train import run_job

    return run_job(cfg)


def refuse_a_run_folder_in_use(argv: list[str]) -> None:
    """Hydra writes `.hydra/` (the command line, the config) into hydra.run.dir before the run takes that
    folder's lock, so a command aimed at a folder another run holds would overwrite that run's record of
    its own command before being refused: refuse it here, before Hydra writes. A sweep's jobs each take
    their own folder's lock; a dated default folder cannot be held by another run."""
    from agentcredit.lit.run_lock import folder_in_use
    from agentcredit.checks.secret_check import composed_configs

    for where, cfg in composed_configs(argv, __file__, CONFIG_PATH, CONFIG_NAME):
        run_dir = OmegaConf.select(cfg, "hydra.run.dir", throw_on_resolution_failure=False) if where == "the config" else None
        if isinstance(run_dir, str) and folder_in_use(run_dir):
            print(f"config error: {run_dir} is in use by another run; wait until that run ends, or choose another "
                  "folder (hydra.run.dir)", file=sys.stderr, flush=True)
            raise SystemExit(2)
        return


if __name__ == "__main__":
    sys.argv[1:] = current_overrides(sys.argv[1:])  # +threads=1 of older command lines: threads is a declared key now
    register_config_nodes()  # credit/_sweepable and credit/_defaults/<name>, from the credit registry
    refuse_secrets(__file__, CONFIG_PATH, CONFIG_NAME)  # command line and every composed config, before Hydra writes anything
    refuse_a_run_folder_in_use(sys.argv[1:])  # before Hydra writes .hydra/ into a folder another run holds
    main()
