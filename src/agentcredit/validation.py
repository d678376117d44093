"""Config checks run when a job starts, before any model is loaded.

Each failure is one line naming the key and what it accepts, e.g.
    config error: credit.K must be an integer >= 0, got -1
"""

from __future__ import annotations

from omegaconf import DictConfig

from agentcredit.components import plain


class ConfigError(ValueError):
    pass


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate_config(cfg: DictConfig) -> None:
    from agentcredit.agent.rollout import RolloutConfig
    from agentcredit.credit.config import validate_credit_config
    from agentcredit.env.factory import browser_kwargs

    credit = plain(cfg.credit)
    _require("name" in credit, "credit has no name; choose a method with credit=<name>")
    try:
        validate_credit_config(credit["name"], credit)
        browser_kwargs(plain(cfg.env))
        RolloutConfig(**plain(cfg.rollout))
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None

    train = plain(cfg.train)
    mb = train.get("micro_batch_size")
    _require(isinstance(mb, int) and mb >= 1, f"train.micro_batch_size must be an integer >= 1, got {mb!r}")
    lr = train.get("lr")
    _require(lr is None or (isinstance(lr, (int, float)) and lr > 0), f"train.lr must be null or a number > 0, got {lr!r}")

    kinds = ("csv", "wandb", "none")
    kind = plain(cfg.logger).get("kind")
    _require(kind in kinds, f"logger.kind must be one of {list(kinds)}, got {kind!r}")
    model_kinds = ("tiny", "smollm2_135m", "hf")
    mk = plain(cfg.model).get("kind")
    _require(mk in model_kinds, f"model.kind must be one of {list(model_kinds)}, got {mk!r}")
