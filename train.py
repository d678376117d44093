"""Hydra entry point. python train.py credit=trace credit.K=3  (config groups: conf/, a link to src/agentcredit/conf; see README.md)."""

import hydra
from omegaconf import DictConfig

import agentcredit.sweep  # noqa: F401  (registers the resolver that names sweep job folders)
from agentcredit.configs import register_config_nodes
from agentcredit.secret_keys import refuse_secret_overrides


@hydra.main(version_base="1.3", config_path="src/agentcredit/conf", config_name="config")
def main(cfg: DictConfig) -> float:
    from agentcredit.train import run_job

    return run_job(cfg)


if __name__ == "__main__":
    refuse_secret_overrides()  # before Hydra writes the command line anywhere
    register_config_nodes()  # credit/_sweepable and credit/_defaults/<name>, from the credit registry
    main()
