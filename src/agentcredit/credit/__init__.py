"""Credit assignment: pure advantage functions (grpo, trace, prover and the baselines spo-chain, gigpo,
budget-grpo, gspo), losses and the method registry.

Importing this package registers the built-in methods, so ``get_credit("trace")`` works after
``import agentcredit.credit``.
"""

from agentcredit.credit import methods  # noqa: F401  (registers every built-in method)
from agentcredit.credit import gold_evidence  # noqa: F401  (registers gold-evidence)
from agentcredit.credit import mc_value  # noqa: F401  (registers mc-value)
from agentcredit.credit import igpo  # noqa: F401  (registers igpo and trace-policy)
from agentcredit.credit import critic  # noqa: F401  (registers turn-critic)
from agentcredit.credit.config import CreditConfig, split_credit_config, validate_credit_config
from agentcredit.credit.group import CreditGroup, VerifiedSegment
from agentcredit.credit.registry import CreditMethod, available_credits, get_credit, register_credit

__all__ = [
    "CreditConfig",
    "CreditGroup",
    "CreditMethod",
    "VerifiedSegment",
    "available_credits",
    "get_credit",
    "register_credit",
    "split_credit_config",
    "validate_credit_config",
]
