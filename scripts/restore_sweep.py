"""`python scripts/restore_sweep.py ...` is `agentcredit restore ...`: the command lives in agentcredit/cli/restore_sweep.py."""

from agentcredit.cli.restore_sweep import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.restore_sweep import main

if __name__ == "__main__":
    raise SystemExit(main())
