"""`python scripts/evaluate.py ...` is `agentcredit evaluate ...`: the command lives in agentcredit/cli/evaluate.py."""

from agentcredit.cli.evaluate import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.evaluate import main

if __name__ == "__main__":
    main()
