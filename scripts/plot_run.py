"""`python scripts/plot_run.py ...` is `agentcredit plot ...`: the command lives in agentcredit/cli/plot_run.py."""

from agentcredit.cli.plot_run import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.plot_run import main

if __name__ == "__main__":
    raise SystemExit(main())
