"""Config checks run when a job starts, before any model is loaded.

Each failure is one line naming the key and what it accepts, e.g.
    config error: credit.K must be an integer >= 0, got -1

`credit/_sweepable` (configs.register_config_nodes) gives the credit node every registered method's knobs (unset), so one
sweep can set a knob that only some of its methods use (`-m credit=grpo,trace credit.K=0,1,3,5`).
`prepare_config` drops the knobs the chosen method does not use (naming the ones that were set in one
warning line) after checking their values, so a bad value is an error even where it would be ignored.
"""

from __future__ import annotations

import copy
import logging

from omegaconf import DictConfig, OmegaConf, open_dict

from agentcredit.common.configs import ConfigError, plain
from agentcredit.credit.knobs import is_finite_number

log = logging.getLogger(__name__)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def knob_owners() -> dict[str, list[str]]:
    """knob -> the registered methods that read it."""
    from agentcredit.credit.config import allowed_knobs
    from agentcredit.credit.registry import available_credits

    owners: dict[str, list[str]] = {}
    for name in available_credits():
        for knob in allowed_knobs(name):
            owners.setdefault(knob, []).append(name)
    return owners


def split_method_credit(credit: dict) -> tuple[dict, dict]:
    """(the chosen method's credit config, other methods' knobs that were set and will be ignored).

    Keys that are nobody's knob stay in the first dict, so the method's own validation rejects them."""
    import agentcredit.credit  # noqa: F401  (registers the built-in methods)
    from agentcredit.credit.config import allowed_knobs

    name = credit.get("name")
    _require(name is not None, "credit has no name; choose a method with credit=<name>")
    try:
        own = set(allowed_knobs(name))
    except ValueError as err:
        raise ConfigError(f"credit={name}: {err}") from None
    owners = knob_owners()
    kept, ignored = {"name": name}, {}
    for key, value in credit.items():
        if key == "name":
            continue
        if key in own or key not in owners:
            kept[key] = value
        elif value is not None:
            ignored[key] = value
    return kept, ignored


def typed_credit_keys(overrides) -> set[str]:
    """The credit knobs a command line sets (`credit.K=3`, `+credit.K=3`, `++credit.K=3`), without `credit.`."""
    from agentcredit.common.secret_keys import override_key

    keys = (override_key(str(o)) or "" for o in overrides)
    return {key.removeprefix("credit.") for key in keys if key.startswith("credit.")}


def stray_knob_problem(credit: dict, typed: set[str]) -> str | None:
    """One line when a knob typed for a single run (`typed`, see `typed_credit_keys`) is another method's and not the
    chosen one's (`credit=grpo credit.K=3`): a mistake there, where a sweep over methods sets such knobs on purpose
    and `prepare_config` drops them with a warning."""
    name = credit.get("name")
    _, ignored = split_method_credit(credit)
    stray = sorted(typed & set(ignored))
    if not stray:
        return None
    owners = knob_owners()[stray[0]]
    return (f"credit={name} does not read credit.{stray[0]} (a knob of {', '.join(owners)}); leave it out, or choose "
            "a method that reads it (credit=<name>)")


def _check_ignored_values(ignored: dict) -> None:
    from agentcredit.credit.config import validate_credit_config

    owners = knob_owners()
    for key, value in ignored.items():
        validate_credit_config(owners[key][0], {key: value})


def group_kinds(group: str) -> tuple[str, ...]:
    """The `kind`s the files of a config group declare (conf/<group>/*.yaml): a new file is a new kind,
    with no second list to keep in step."""
    from agentcredit.common.paths import config_dir

    declared = (OmegaConf.load(f).get("kind") for f in sorted((config_dir() / group).glob("*.yaml")))
    return tuple(dict.fromkeys(str(kind) for kind in declared if kind))


def missing_values(node, prefix: str = "") -> list[str]:
    """Keys whose value is ??? (without resolving interpolations, which would fail on the first of them)."""
    missing = []
    for key in node.keys() if OmegaConf.is_dict(node) else range(len(node)):
        if OmegaConf.is_missing(node, key):
            missing.append(f"{prefix}{key}")
        elif not OmegaConf.is_interpolation(node, key) and OmegaConf.is_config(node._get_node(key)):
            missing += missing_values(node._get_node(key), f"{prefix}{key}.")
    return missing


def check_groups(cfg: DictConfig, credit: dict) -> None:
    """`config_checks` over every group, in the order a reader meets them in conf/config.yaml; `credit`: the chosen
    method's credit node (`split_method_credit`)."""
    from agentcredit.checks import config_checks as checks
    from agentcredit.credit.registry import get_credit

    method_name = credit["name"]
    try:
        checks.check_seed(cfg.get("seed"))
        checks.check_threads(cfg.get("threads", "auto"))
        checks.check_data(plain(cfg.data))
        checks.check_env(plain(cfg.env))
        checks.check_trainer(plain(cfg.trainer))
        checks.check_accelerator_present(plain(cfg.trainer))
        checks.check_checkpoint(plain(cfg.get("checkpoint")))
        checks.check_train(plain(cfg.train))
        checks.check_model(plain(cfg.model))
        if get_credit(method_name).reads("verified_segment"):
            checks.check_judge(plain(cfg.judge))
        if get_credit(method_name).reads("evidence"):
            checks.check_needed_facts(plain(cfg.data), method_name)
        checks.check_success_threshold(credit, plain(cfg.env))
        checks.check_ckpt_path(cfg.get("ckpt_path"))
        checks.check_combinations({"model": plain(cfg.model), "data": plain(cfg.data), "trainer": plain(cfg.trainer)})
        checks.check_fsdp_model(plain(cfg.trainer), plain(cfg.model))
    except checks.ValueProblem as err:
        raise ConfigError(str(err)) from None


def validate_config(cfg: DictConfig) -> None:
    from agentcredit.agent.engines import check_engine
    from agentcredit.agent.engines.vllm_settings import vllm_settings
    from agentcredit.agent.rollout import RolloutConfig
    from agentcredit.testbed.warmstart import WarmStartConfig
    from agentcredit.credit.config import validate_credit_config
    from agentcredit.env.factory import browser_kwargs
    from agentcredit.common.secret_keys import ENV_VARS, secret_values_in_config

    missing = missing_values(cfg)
    if missing:
        raise ConfigError(f"{', '.join(missing)} must be set (it is ??? in the config); add {missing[0]}=<value> to the command")
    secrets = secret_values_in_config(cfg)
    if secrets:
        var = ENV_VARS.get(secrets[0], "an environment variable")
        raise ConfigError(f"{secrets[0]} holds a secret in the config, which Hydra copies into the run folder; "
                          f"leave it null and set {var} (environment or .env), or write ${{oc.env:NAME}}")
    credit, ignored = split_method_credit(plain(cfg.credit))
    check_groups(cfg, credit)
    # credit=gspo records its runs as arm gspo, and the sequence-level ratio is what makes them GSPO's.
    _require(cfg.get("arm") != "gspo" or credit.get("ratio_level") == "sequence",
             f"credit=gspo is GRPO with the sequence-level ratio; credit.ratio_level={credit.get('ratio_level')} would "
             f"run another loss under the name gspo: leave it out, or use credit=grpo credit.ratio_level=...")
    try:
        validate_credit_config(credit["name"], credit)
        _check_ignored_values(ignored)
        browser_kwargs(plain(cfg.env))
        rollout = RolloutConfig(**plain(cfg.rollout))
        check_engine(rollout.engine)
        _check_rollout_memory(cfg, credit)
        if rollout.engine == "vllm":
            _check_kv_cache_fits(vllm_settings(rollout.vllm), plain(cfg.model), rollout.max_context_tokens)
            _require(vllm_settings(rollout.vllm).dtype is not None or cfg.model.get("dtype") != "float64",
                     "rollout.engine=vllm has no float64 engine: with model.dtype=float64 set rollout.vllm.dtype=float32, "
                     "or use rollout.engine=hf")
        if "warmstart" in cfg:
            WarmStartConfig(**plain(cfg.warmstart))
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None
    from agentcredit.checks import config_checks

    try:
        config_checks.check_reference_path(credit.get("reference_path"), "credit.reference_path")
    except config_checks.ValueProblem as err:
        raise ConfigError(str(err)) from None

    train = plain(cfg.train)
    mb = train.get("micro_batch_size")
    _require(isinstance(mb, int) and mb >= 1, f"train.micro_batch_size must be an integer >= 1, got {mb!r}")
    free = train.get("padding_free", "auto")
    _require(isinstance(free, bool) or free == "auto", f"train.padding_free must be true, false or auto, got {free!r}")
    share = train.get("share_prefixes", True)
    _require(isinstance(share, bool), f"train.share_prefixes must be true or false, got {share!r}")
    skip = train.get("skip_zero_advantage", True)
    _require(isinstance(skip, bool), f"train.skip_zero_advantage must be true or false, got {skip!r}")
    lr = train.get("lr")
    _require(lr is None or (is_finite_number(lr) and lr > 0),
             f"train.lr must be null or a number > 0, got {lr!r}")

    kinds = group_kinds("logger")
    logger = plain(cfg.logger)
    _require(logger.get("kind") in kinds, f"logger.kind must be one of {list(kinds)}, got {logger.get('kind')!r}")
    if logger["kind"] == "wandb":
        from agentcredit.lit.wandb_logger import wandb_mode

        try:
            wandb_mode(logger.get("mode"))
        except ValueError as err:
            raise ConfigError(str(err)) from None
    _check_engine_world(plain(cfg.trainer), plain(cfg.rollout))
    model_kinds = group_kinds("model")
    mk = plain(cfg.model).get("kind")
    _require(mk in model_kinds, f"model.kind must be one of {list(model_kinds)}, got {mk!r}")


def _check_engine_world(trainer: dict, rollout: dict) -> None:
    """rollout.engine=vllm under ddp/fsdp: each engine spans tensor_parallel_size processes of the trainer."""
    strategy = trainer.get("strategy")
    strategy = str(strategy.get("name") if isinstance(strategy, dict) else strategy)
    if rollout.get("engine") != "vllm" or not strategy.startswith(("ddp", "fsdp")):
        return
    devices, nodes = trainer.get("devices"), trainer.get("num_nodes") or 1
    tp = (rollout.get("vllm") or {}).get("tensor_parallel_size", 1)
    if isinstance(devices, int) and isinstance(nodes, int) and isinstance(tp, int):
        world = devices * nodes
        _require(world % tp == 0, f"rollout.vllm.tensor_parallel_size={tp} must divide the number of training "
                                  f"processes ({world} = trainer.devices x trainer.num_nodes); each engine spans "
                                  "tensor_parallel_size of them")
    _require(tp == 1, f"rollout.vllm.tensor_parallel_size={tp} with trainer.strategy={strategy} is not supported yet: "
                      "each process runs its own engine of tensor_parallel_size=1")


def _extra_rollout_phases(cfg: DictConfig, credit: dict) -> list[tuple[int, int]]:
    """Budget-matched GRPO's extra rollouts per phase, read now (a ProVer run's metrics.csv for match_metrics), so that
    a missing or damaged file, or one that gives no budget to match, is one line before any model loads."""
    from agentcredit.credit.budget import GROUP_KNOBS
    from agentcredit.lit.credit_inputs import extra_rollout_phases
    from agentcredit.records.reading import RecordError

    path, extra = credit.get("match_metrics"), credit.get("extra_rollouts")
    if path is None:
        return [(0, int(extra or 0))]
    try:
        phases = extra_rollout_phases({k: credit.get(k, v) for k, v in GROUP_KNOBS.items()}, int(cfg.rollout.group_size))
    except (RecordError, ValueError, OSError) as err:
        message = str(err)
        raise ConfigError(message if message.startswith("credit.") else f"credit.match_metrics: {message}") from None
    negative = [(first, n) for first, n in phases if n < 0]
    _require(not negative, f"credit.match_metrics={path!r} gives {negative[0][1] if negative else 0} extra rollouts a "
                           "group: its credit/extra_tokens are below zero; is it a ProVer run's metrics.csv?")
    # budget-grpo's own extra_rollouts (2) stands in until a ProVer run is named; say what replaces it.
    log.info(f"credit.match_metrics: extra rollouts a group from step (first step, rollouts) {phases}; "
             f"credit.extra_rollouts={extra} is not used")
    return phases


def _check_rollout_memory(cfg: DictConfig, credit: dict) -> None:
    """Rows decoded together (group size x prompts with any extra rollouts, continuations, validation and test
    calls) against the machine's memory."""
    from agentcredit.models.memory_bounds import training_memory_problem

    extra = max(n for _, n in _extra_rollout_phases(cfg, credit))
    problem = training_memory_problem(plain(cfg.data), plain(cfg.rollout), plain(cfg.model), plain(cfg.trainer), credit,
                                      extra_rollouts=extra)
    _require(problem is None, problem or "")


def _check_kv_cache_fits(settings, model: dict, max_context_tokens: int) -> None:
    """rollout.vllm.kv_cache_gib against the machine's memory, then against one full context of the policy,
    from its config (no weights)."""
    from agentcredit.agent.engines.vllm_settings import block_size, kv_cache_machine_problem, kv_cache_problem
    from agentcredit.models.shape import attention_shape

    machine = kv_cache_machine_problem(settings)
    _require(machine is None, machine or "")
    shape = attention_shape(model)
    if shape is None:
        return  # not readable offline: vLLM checks the cache when the engine starts
    problem = kv_cache_problem(settings, layers=shape.layers, kv_heads=shape.kv_heads, head_dim=shape.head_dim,
                               model_dtype=str(model.get("dtype", "float32")), max_context_tokens=max_context_tokens,
                               block=block_size(settings), source=shape.source)
    _require(problem is None, problem or "")


def prepare_config(cfg: DictConfig) -> DictConfig:
    """Validate, and return a copy whose credit node holds only the chosen method's knobs."""
    validate_config(cfg)
    credit, ignored = split_method_credit(plain(cfg.credit))
    if ignored:
        knobs = ", ".join(f"credit.{k}={v}" for k, v in ignored.items())
        log.warning(f"credit={credit['name']} does not use {knobs}; ignored")
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.credit = OmegaConf.create(credit)
    return cfg
