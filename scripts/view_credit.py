"""`python scripts/view_credit.py ...` is `agentcredit view ...`: the command lives in agentcredit/cli/view_credit.py."""

from agentcredit.cli.view_credit import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.view_credit import main

if __name__ == "__main__":
    raise SystemExit(main())
