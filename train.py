"""Hydra entry point. python train.py credit=trace credit.K=3  (config groups: conf/, a link to src/agentcredit/conf; see README.md)."""

import hydra
from omegaconf import DictConfig

import agentcredit.sweep  # noqa: F401  (registers the resolver that names sweep job folders)
from agentcredit.configs import register_config_nodes
from agentcredit.secret_check import refuse_secrets


CONFIG_PATH, CONFIG_NAME = "src/agentcredit/conf", "config"


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name=CONFIG_NAME)
def main(cfg: DictConfig) -> float:
    from agentcredit.train import run_job

    return run_job(cfg)


if __name__ == "__main__":
    register_config_nodes()  # credit/_sweepable and credit/_defaults/<name>, from the credit registry
    refuse_secrets(__file__, CONFIG_PATH, CONFIG_NAME)  # command line and every composed config, before Hydra writes anything
    main()
