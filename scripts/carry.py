"""`python scripts/carry.py ...` is `agentcredit carry ...`: the command lives in agentcredit/cli/carry.py."""

from agentcredit.cli.carry import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.carry import main

if __name__ == "__main__":
    raise SystemExit(main())
