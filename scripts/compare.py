"""`python scripts/compare.py ...` is `agentcredit compare ...`: the command lives in agentcredit/cli/compare.py."""

from agentcredit.cli.compare import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
