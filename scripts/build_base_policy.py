"""`python scripts/build_base_policy.py ...` is `agentcredit base-policy ...`: the command lives in agentcredit/cli/build_base_policy.py."""

from agentcredit.cli.build_base_policy import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.build_base_policy import main

if __name__ == "__main__":
    raise SystemExit(main())
