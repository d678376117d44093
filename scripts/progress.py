"""`python scripts/progress.py ...` is `agentcredit progress ...`: the command lives in agentcredit/cli/progress.py."""

from agentcredit.cli.progress import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.progress import main

if __name__ == "__main__":
    raise SystemExit(main())
