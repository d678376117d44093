"""`python scripts/credit_fidelity.py ...` is `agentcredit fidelity ...`: the command lives in agentcredit/cli/credit_fidelity.py."""

from agentcredit.cli.credit_fidelity import *  # noqa: F401,F403  (its functions, for code that loads this file)
from agentcredit.cli.credit_fidelity import main

if __name__ == "__main__":
    main()
