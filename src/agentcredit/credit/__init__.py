"""Credit assignment: one module per credit method (grpo, trace, prover, spo-chain, gigpo, igpo and trace-policy,
gold-evidence, mc-value, turn-critic), each holding its pure functions, its registration and its knobs' value
checks; the loss and its ratio modes (``losses``); the group-size knobs (``budget``); the method registry.

Importing this package imports every module in it, and so registers every method found there:
``get_credit("trace")`` works after ``import agentcredit.credit``, and a new method is one new file here.
"""

import importlib
import pkgutil

# Every module of the folder, in name order: a method registers itself when its module is imported.
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

from agentcredit.credit.config import CreditConfig, split_credit_config, validate_credit_config  # noqa: E402
from agentcredit.credit.group import CreditGroup, VerifiedSegment  # noqa: E402
from agentcredit.credit.registry import CreditMethod, available_credits, get_credit, register_credit  # noqa: E402

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
