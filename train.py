"""Hydra entry point. python train.py credit=trace credit.K=3  (the same as `agentcredit train ...`; config
groups: conf/, a link to src/agentcredit/conf; see README.md and docs/)."""

from agentcredit.cli.train import main

if __name__ == "__main__":
    main()
