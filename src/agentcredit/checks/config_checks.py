"""Value checks of the config groups that no constructor checks before a model loads (`validation.py`
runs them). Each failure is one line that names the key and what it accepts:

    config error: trainer.max_steps must be an integer >= 1 (or -1: no limit), got -5

Lightning, the world generator and the browser would reject most of these too, but only after the
model (or the tiny testbed's base policy) has loaded, with a traceback, or naming another key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcredit.credit.knobs import is_finite_number
from agentcredit.world.config import MAX_HOPS, TEMPLATES, WorldConfig

# Lightning's accepted `precision` values (lightning.fabric.connector._PRECISION_INPUT).
PRECISIONS = ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true", "bf16-mixed",
              "32-true", "64-true", "64", "32", "16", "bf16")
# Precisions whose Lightning plugin converts every batch: it refuses the frozen question records a batch holds
# here. The same arithmetic comes from the weights' own dtype under 32-true, which leaves the batch alone.
CONVERTING_PRECISIONS = {"64-true": "model.dtype=float64", "64": "model.dtype=float64", "16-true": "model.dtype=float16",
                         "bf16-true": "model.dtype=bfloat16", "transformer-engine": "trainer.precision=bf16-mixed",
                         "transformer-engine-float16": "trainer.precision=16-mixed"}
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps", "tpu")
RETRIEVERS = ("dense", "bm25")
DTYPES = ("float32", "bfloat16", "float16", "float64")
ATTENTION = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention")
SYSTEM_PROMPTS = ("compact", "full")


class ValueProblem(ValueError):
    """One bad value; `validation.validate_config` turns it into a ConfigError."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def need(ok: bool, key: str, accepts: str, value: Any) -> None:
    if not ok:
        raise ValueProblem(f"{key} must be {accepts}, got {value!r}")


def need_int(cfg: Mapping, key: str, prefix: str, low: int = 0, also: tuple = (), required: bool = True) -> None:
    if key not in cfg and not required:
        return
    value = cfg.get(key)
    extra = "".join(f" (or {a})" for a in also)
    need(value in also or (_is_int(value) and value >= low), f"{prefix}{key}", f"an integer >= {low}{extra}", value)


def need_number(cfg: Mapping, key: str, prefix: str, low: float, high: float | None = None, *, open_low=False,
                open_high=True, required: bool = True) -> None:
    if key not in cfg and not required:
        return
    value = cfg.get(key)
    ok = is_finite_number(value) and (value > low if open_low else value >= low)
    if high is not None:
        ok = ok and (value < high if open_high else value <= high)
    left, right = "(" if open_low else "[", ")" if open_high else "]"
    accepts = f"a number in {left}{low:g}, {high:g}{right}" if high is not None else \
        f"a number {'>' if open_low else '>='} {low:g}"
    need(ok, f"{prefix}{key}", accepts, value)


def need_choice(cfg: Mapping, key: str, prefix: str, choices: tuple, required: bool = True) -> None:
    if key not in cfg and not required:
        return
    value = cfg.get(key)
    need(value in choices, f"{prefix}{key}", f"one of {list(choices)}", value)


def need_bool(cfg: Mapping, key: str, prefix: str) -> None:
    if key in cfg:
        need(isinstance(cfg[key], bool), f"{prefix}{key}", "true or false", cfg[key])


def need_file(value: Any, key: str, what: str, suffixes: tuple[str, ...] = ()) -> None:
    if value in (None, ""):
        return
    need(isinstance(value, str), key, "a path", value)
    path = Path(value).expanduser()
    if not path.exists():
        raise ValueProblem(f"{key}={value!r} does not exist; give {what}")
    if not path.is_file():
        raise ValueProblem(f"{key}={value!r} is a folder, not a file; give {what}")
    if suffixes and path.suffix not in suffixes:
        raise ValueProblem(f"{key}={value!r} has the extension {path.suffix or '(none)'!r}; give {what}")


# ---------------------------------------------------------------- groups

MAX_SEED = 2**32 - 1  # numpy's seeds, which Lightning's seed_everything sets with torch's and Python's


def check_seed(seed: Any) -> None:
    need(_is_int(seed) and 0 <= seed <= MAX_SEED, "seed", f"an integer from 0 to {MAX_SEED}", seed)


def check_threads(threads: Any) -> None:
    need(threads == "auto" or (_is_int(threads) and threads >= 1), "threads", "auto or an integer >= 1", threads)


def check_world(world: Mapping) -> None:
    p = "data.world."
    known = {f for f in WorldConfig.__dataclass_fields__}
    unknown = sorted(set(world) - known)
    if unknown:
        raise ValueProblem(f"unknown key(s) {', '.join(p + k for k in unknown)}; known: {', '.join(sorted(known))}")
    need_int(world, "seed", p, required=False)
    need_int(world, "num_documents", p, low=40, required=False)
    need_int(world, "num_questions", p, low=1, required=False)
    for key in ("hops_min", "hops_max"):
        value = world.get(key)
        need(key not in world or (_is_int(value) and 2 <= value <= MAX_HOPS), p + key, f"an integer in 2..{MAX_HOPS}",
             value)
    lo, hi = world.get("hops_min", 2), world.get("hops_max", 4)
    need(lo <= hi, p + "hops_min", f"<= data.world.hops_max ({hi})", lo)
    need_int(world, "distractors_min", p, required=False)
    need_int(world, "distractors_max", p, low=world.get("distractors_min", 0), required=False)
    need_number(world, "near_duplicate_rate", p, 0.0, 1.0, open_high=False, required=False)
    for key in ("max_page_lines", "max_answer_words", "max_attempts"):
        need_int(world, key, p, low=1, required=False)
    templates = world.get("templates", list(TEMPLATES))
    need(isinstance(templates, list) and templates and all(t in TEMPLATES for t in templates), p + "templates",
         f"a non-empty list of {list(TEMPLATES)}", templates)
    try:
        WorldConfig.from_mapping(world)
    except (TypeError, ValueError) as err:
        raise ValueProblem(f"data.world: {err}") from None


def check_data(data: Mapping) -> None:
    p = "data."
    known = ("world", "prompts_per_step", "n_val", "n_test", "val_fraction", "test_fraction", "split_seed",
             "corpus_path", "questions_path", "use_cache", "test_batch_size", "test_batches_per_call",
             "test_samples_per_question", "val_batches_per_call")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueProblem(f"unknown key(s) {', '.join(p + k for k in unknown)}; known: {', '.join(known)}")
    need_int(data, "prompts_per_step", p, low=1, required=False)
    need_int(data, "n_val", p, low=0, required=False)
    need_int(data, "n_test", p, low=0, required=False)
    if data.get("test_batch_size") is not None:
        need_int(data, "test_batch_size", p, low=1, required=False)
    need_int(data, "test_batches_per_call", p, low=1, required=False)
    need_int(data, "test_samples_per_question", p, low=1, required=False)
    need_int(data, "val_batches_per_call", p, low=1, required=False)
    need_int(data, "split_seed", p, low=0, required=False)
    need_number(data, "val_fraction", p, 0.0, 1.0, required=False)
    need_number(data, "test_fraction", p, 0.0, 1.0, required=False)
    held_out = data.get("val_fraction", 0.2) + data.get("test_fraction", 0.2)
    need(held_out < 1, p + "val_fraction", f"< 1 - data.test_fraction ({data.get('test_fraction', 0.2)}), so that "
         "questions are left for training", data.get("val_fraction"))
    need_bool(data, "use_cache", p)
    corpus, questions = data.get("corpus_path"), data.get("questions_path")
    if (corpus is None) != (questions is None):
        missing = "data.questions_path" if questions is None else "data.corpus_path"
        raise ValueProblem(f"{missing} must be set too: your own data needs both data.corpus_path and data.questions_path")
    need_file(corpus, "data.corpus_path", "a .jsonl or .parquet corpus file", (".jsonl", ".parquet"))
    need_file(questions, "data.questions_path", "a .jsonl questions file", (".jsonl",))
    if corpus is None:
        check_world(data.get("world") or {})


def check_needed_facts(data: Mapping, method: str) -> None:
    """A method that credits the turn which first shows a fact the answer needs (gold-evidence) needs those facts:
    the synthetic world knows them; your own questions must name them (world/supporting_facts.py)."""
    from agentcredit.world.supporting_facts import FIELD
    from agentcredit.world.user import UserDataError, read_jsonl

    path = data.get("questions_path")
    if path in (None, ""):
        return
    try:
        records = read_jsonl(Path(path).expanduser(), "questions")
    except UserDataError as err:
        raise ValueProblem(str(err)) from None
    for where, record in records:
        if record.get(FIELD) in (None, [], ""):
            raise ValueProblem(f"credit={method} needs the facts each answer rests on, but {path} {where} has no "
                               f"{FIELD!r}; give every question one ([{{\"doc_id\": ..., \"line\": ...}}] or HotpotQA's "
                               "[[title, sentence], ...]) or choose another credit method")


def check_env(env: Mapping) -> None:
    p = "env."
    need_choice(env, "retriever", p, RETRIEVERS, required=False)
    for key in ("default_topn", "default_num_lines", "max_query_chars", "max_pattern_chars", "max_topn",
                "max_num_lines", "max_line_chars", "max_find_matches"):
        need_int(env, key, p, low=1, required=False)
    need_int(env, "summary_chars", p, low=0, required=False)
    for key, limit in (("default_topn", "max_topn"), ("default_num_lines", "max_num_lines")):
        if key in env and limit in env:
            need(env[key] <= env[limit], p + key, f"<= env.{limit} ({env[limit]})", env[key])
    reward = env.get("reward") or {}
    need(isinstance(reward, Mapping), p + "reward", "a mapping with correct_score and format_score", reward)
    for key in ("correct_score", "format_score"):
        need_number(reward, key, "env.reward.", 0.0, required=False)
    correct, form = reward_scores(env)
    # success (accuracy) is reward >= correct_score: at or below format_score a well-formed wrong answer counts
    need(correct > form, "env.reward.correct_score", f"> env.reward.format_score ({form:g}), or a well-formed wrong "
         "answer counts as correct", correct)


def reward_scores(env: Mapping) -> tuple[float, float]:
    """(correct_score, format_score) of an env config, with the reward's defaults where it sets none."""
    from agentcredit.env.reward import AnswerReward

    reward = env.get("reward") or {}
    return (float(reward.get("correct_score", AnswerReward.correct_score)),
            float(reward.get("format_score", AnswerReward.format_score)))


def check_success_threshold(credit: Mapping, env: Mapping) -> None:
    """A method's success rule (credit.success_threshold: reward >= it is a success) within reach: above a correct
    answer's reward no rollout ever succeeds, no group is ever mixed, and the method would quietly be GRPO. A value at
    or below env.reward.format_score is allowed on purpose: it counts well-formed wrong answers (or, at 0, every
    rollout) as successes."""
    if "success_threshold" not in credit:
        return
    correct, form = reward_scores(env)
    value = credit["success_threshold"]
    need(is_finite_number(value) and value <= correct + form, "credit.success_threshold",
         f"a number <= {correct + form:g} (a correct answer's reward: env.reward.correct_score + format_score), or no "
         "rollout succeeds", value)


def check_trainer(trainer: Mapping) -> None:
    p = "trainer."
    need_int(trainer, "max_steps", p, low=1, also=(-1,), required=False)
    need_choice(trainer, "precision", p, PRECISIONS + tuple(int(x) for x in ("16", "32", "64")), required=False)
    instead = CONVERTING_PRECISIONS.get(str(trainer.get("precision")))
    if instead is not None:
        with_32 = " with trainer.precision=32-true" if instead.startswith("model.") else ""
        raise ValueProblem(f"trainer.precision={trainer['precision']} is not supported (its plugin converts every batch, "
                           f"and a batch here holds question records); use {instead}{with_32}")
    need_choice(trainer, "accelerator", p, ACCELERATORS, required=False)
    devices = trainer.get("devices", "auto")
    ok = devices in ("auto", -1, "-1") or (_is_int(devices) and devices >= 1) or \
        (isinstance(devices, list) and devices and all(_is_int(d) and d >= 0 for d in devices)) or \
        (isinstance(devices, str) and all(d.strip().isdigit() for d in devices.split(",") if d.strip()) and devices.strip(", "))
    need(ok, p + "devices", "an integer >= 1, -1, auto, or a list of device ids", devices)
    need_int(trainer, "num_nodes", p, low=1, required=False)
    val = trainer.get("val_check_interval")
    need(val is None or (_is_int(val) and val >= 1), p + "val_check_interval",
         "an integer >= 1 (training steps between validations)", val)
    limit = trainer.get("limit_val_batches")
    need(limit is None or (_is_int(limit) and limit >= 0) or (isinstance(limit, float) and 0.0 <= limit <= 1.0),
         p + "limit_val_batches", "an integer >= 0 or a fraction in [0, 1]", limit)
    need_int(trainer, "num_sanity_val_steps", p, low=0, also=(-1,), required=False)
    need_int(trainer, "log_every_n_steps", p, low=1, required=False)
    need_bool(trainer, "enable_progress_bar", p)
    need_int(trainer, "collective_timeout_s", p, low=1, required=False)  # lit/rank_agreement.py
    strategy = trainer.get("strategy", "auto")
    if isinstance(strategy, Mapping):
        check_fsdp(strategy, trainer)
    else:
        need(isinstance(strategy, str) and strategy, p + "strategy", "a strategy name (auto, ddp, fsdp, ...)", strategy)


FSDP_KEYS = ("name", "param_dtype", "reduce_dtype", "cpu_offload", "activation_checkpointing", "reshard_after_forward")


def check_fsdp(strategy: Mapping, trainer: Mapping) -> None:
    """trainer.strategy as a mapping: FSDP2's settings (conf/trainer/fsdp.yaml, lit/fsdp2.FSDP2Strategy)."""
    p = "trainer.strategy."
    need(strategy.get("name") == "fsdp", p + "name", "fsdp (or give a plain strategy name such as ddp)", strategy.get("name"))
    unknown = [str(key) for key in strategy if key not in FSDP_KEYS]
    if unknown:
        raise ValueProblem(f"{p}{unknown[0]} is not a setting of FSDP; known: {', '.join(FSDP_KEYS)}")
    for key in ("param_dtype", "reduce_dtype"):
        need_choice(strategy, key, p, (None, "float32", "bfloat16", "float16"), required=False)
    for key in ("cpu_offload", "activation_checkpointing", "reshard_after_forward"):
        need_bool(strategy, key, p)
    need(not strategy.get("cpu_offload") or trainer.get("accelerator") not in ("cpu", None), p + "cpu_offload",
         "false with trainer.accelerator=cpu (the shards are in CPU memory already)", strategy.get("cpu_offload"))


def check_checkpoint(checkpoint: Mapping) -> None:
    need_int(checkpoint, "every_n_steps", "checkpoint.", low=1, required=False)
    need_int(checkpoint, "last_every_n_steps", "checkpoint.", low=1, required=False)


def check_train(train: Mapping) -> None:
    p = "train."
    need_number(train, "weight_decay", p, 0.0, required=False)
    need_number(train, "grad_clip", p, 0.0, open_low=True, required=False)
    need_number(train, "val_temperature", p, 0.0, required=False)
    need_int(train, "samples_per_val", p, low=0, required=False)
    betas = train.get("betas", [0.9, 0.98])
    need(isinstance(betas, list) and len(betas) == 2 and all(is_finite_number(b) and 0 <= b < 1 for b in betas),
         p + "betas", "two numbers in [0, 1)", betas)


def check_model(model: Mapping) -> None:
    p = "model."
    kind = model.get("kind")
    need_choice(model, "dtype", p, DTYPES, required=False)
    need_choice(model, "attn_implementation", p, ATTENTION, required=False)
    need_choice(model, "system_prompt", p, SYSTEM_PROMPTS, required=False)
    need_bool(model, "warm_start", p)
    if model.get("rl_lr") is not None:
        need_number(model, "rl_lr", p, 0.0, open_low=True)
    if kind == "tiny":
        for key in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size",
                    "max_position_embeddings"):
            need_int(model, key, p, low=1, required=False)
        need_int(model, "vocab_size", p, low=300, required=False)  # 256 bytes + the special and protocol tokens
        heads, kv, hidden = model.get("num_heads", 4), model.get("num_kv_heads", 4), model.get("hidden_size", 128)
        need(hidden % heads == 0, p + "hidden_size", f"a multiple of model.num_heads ({heads})", hidden)
        need(heads % kv == 0, p + "num_kv_heads", f"a divisor of model.num_heads ({heads})", kv)
        need_choice(model, "architecture", p, ("llama", "qwen3"), required=False)
        init = model.get("init_path")
        if init:
            need_file(init, p + "init_path", "a saved tiny policy directory (model + tokenizer)")
            need((Path(init) / "config.json").exists(), p + "init_path", "a saved model directory (with config.json)", init)
    if kind == "hf":
        name = model.get("name_or_path")
        need(isinstance(name, str) and name.strip(), p + "name_or_path", "a Hugging Face id or local directory", name)
    lora = model.get("lora") or {}
    need_bool(lora, "enabled", p + "lora.")
    if lora.get("enabled"):
        need_int(lora, "r", p + "lora.", low=1, required=False)
        need_number(lora, "alpha", p + "lora.", 0.0, open_low=True, required=False)
        need_number(lora, "dropout", p + "lora.", 0.0, 1.0, required=False)
    reference = model.get("reference") or {}
    check_reference_path(reference.get("path"), p + "reference.path")


REFERENCE_WHAT = "a save_pretrained directory (with its config.json) or a .ckpt of this project"


def check_reference_path(value: Any, key: str) -> None:
    """A frozen reference's weights (model.reference.path, credit.reference_path): null (the policy's initial
    weights), a save_pretrained directory holding config.json, or a whole-looking .ckpt of this project; read only
    after the policy has loaded, so checked here."""
    if value in (None, ""):
        return
    need(isinstance(value, str), key, "null or a path", value)
    path = Path(value).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueProblem(f"{key}={value!r} is a folder without config.json; give {REFERENCE_WHAT}")
        return
    need_file(value, key, REFERENCE_WHAT, suffixes=(".ckpt",))  # exists, a file, a .ckpt
    from agentcredit.common.checkpoint_file import whole_checkpoint_problem

    problem = whole_checkpoint_problem(path)
    if problem:
        raise ValueProblem(f"{key}: {problem}; give {REFERENCE_WHAT}")


def check_judge(judge: Mapping, environ: Mapping[str, str] = os.environ) -> None:
    """The judge ProVer will use; only called when the chosen credit method needs one."""
    from agentcredit.judge.factory import BUILDERS, LOCAL_MODEL_KINDS
    from agentcredit.judge.openai_judge import ENV_API_KEY, ENV_BASE_URL, ENV_MODEL

    kind = judge.get("kind")
    need(kind in BUILDERS, "judge.kind", f"one of {sorted(BUILDERS)} (judge=<kind>)", kind)
    p = "judge."
    if kind == "openai":
        if not (judge.get("model") or environ.get(ENV_MODEL)):
            raise ValueProblem(f"judge.model must be set for judge=openai: set {ENV_MODEL} (environment or .env) "
                               "or judge.model=<name>")
        if not (judge.get("base_url") or environ.get(ENV_BASE_URL) or judge.get("api_key") or environ.get(ENV_API_KEY)):
            raise ValueProblem(f"judge.base_url must be set for judge=openai: set {ENV_BASE_URL} (self-hosted) or "
                               f"{ENV_API_KEY} (the OpenAI API) in the environment or .env")
        need_number(judge, "timeout_s", p, 0.0, open_low=True, required=False)
        need_int(judge, "max_retries", p, low=0, required=False)
        if judge.get("max_completion_tokens") is not None:
            need_int(judge, "max_completion_tokens", p, low=1)
        need_int(judge, "max_reply_bytes", p, low=1, required=False)
    if kind == "local":
        model_kind = (judge.get("model") or {}).get("kind")
        need(model_kind in LOCAL_MODEL_KINDS, "judge.model.kind", f"one of {list(LOCAL_MODEL_KINDS)}", model_kind)
        need_int(judge, "max_new_tokens", p, low=1, required=False)
    if kind in ("openai", "local"):
        need_int(judge, "max_tool_rounds", p, low=0, required=False)
    if kind == "random":
        from agentcredit.judge.random_judge import MODES

        need_choice(judge, "mode", p, tuple(MODES), required=False)
    if judge.get("step_budget_s") is not None:  # null: no per-step limit
        need_number(judge, "step_budget_s", p, 0.0, open_low=True)


def check_accelerator_present(trainer: Mapping) -> None:
    """trainer.accelerator names hardware this machine has; else Lightning says so in a traceback, after the
    model has loaded."""
    import importlib.util

    import torch

    accelerator = str(trainer.get("accelerator", "auto"))
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    missing = {"gpu": ("a CUDA or Apple MPS device", not (torch.cuda.is_available() or mps)),
               "cuda": ("a CUDA device", not torch.cuda.is_available()),
               "mps": ("an Apple MPS device", not mps),
               "tpu": ("torch_xla, which TPUs need", importlib.util.find_spec("torch_xla") is None)}.get(accelerator)
    if missing is not None and missing[1]:
        raise ValueProblem(f"trainer.accelerator={accelerator} needs {missing[0]}, and this machine has none; "
                           "use trainer.accelerator=cpu (or trainer=cpu)")


def check_combinations(cfg: Mapping) -> None:
    """Settings that are each fine but cannot work together."""
    model, data, trainer = cfg.get("model") or {}, cfg.get("data") or {}, cfg.get("trainer") or {}
    limit, per_call = trainer.get("limit_val_batches"), data.get("val_batches_per_call", 1)
    every_or_none = limit is None or (_is_int(limit) and limit == 0) or (isinstance(limit, float) and limit in (0.0, 1.0))
    if _is_int(per_call) and per_call > 1 and not every_or_none:
        raise ValueProblem(f"trainer.limit_val_batches={limit} counts calls of data.val_batches_per_call={per_call} "
                           "batches each, not batches of questions; set it to 1.0 (all) or 0 (none) and choose the "
                           "questions with data.n_val")
    n_val, per_step = data.get("n_val"), data.get("prompts_per_step")
    if _is_int(limit) and limit > 0 and all(map(_is_int, (n_val, per_step, per_call))) and \
            limit * per_call * per_step < n_val:
        raise ValueProblem(f"data.n_val={n_val} asks for {n_val} validation questions, but trainer.limit_val_batches="
                           f"{limit} stops after {limit * per_call * per_step} ({limit} batches of "
                           f"data.prompts_per_step={per_step}); set trainer.limit_val_batches=1.0 and choose how many "
                           "with data.n_val")
    if isinstance(limit, float) and 0.0 < limit < 1.0:
        raise ValueProblem(f"trainer.limit_val_batches={limit} validates part of the data.n_val questions; set it to "
                           "1.0 and choose how many with data.n_val")
    precision = str(trainer.get("precision", "32-true"))
    if model.get("dtype") == "float64" and precision not in ("32-true", "32"):
        raise ValueProblem(f"model.dtype=float64 computes in float64 only with trainer.precision=32-true (which leaves "
                           f"the weights' dtype as it is), got trainer.precision={precision}")
    if model.get("warm_start") and model.get("kind") != "tiny" and data.get("corpus_path") is not None:
        raise ValueProblem(f"model.warm_start must be false for model={model.get('kind')} on your own data: the warm "
                           "start plays oracle episodes, which only the synthetic world has (the tiny model on your "
                           "own data starts from the synthetic world's base policy instead)")


def check_fsdp_model(trainer: Mapping, model: Mapping) -> None:
    """trainer=fsdp shards one unit per decoder layer: a model=hf architecture without *DecoderLayer
    classes (GPT-2, GPT-NeoX, BLOOM, ...) is refused from its config.json alone, before any weights load.
    The tiny model and SmolLM2 are Llamas; a hub id not in the local cache cannot be told here."""
    if not isinstance(trainer.get("strategy"), Mapping) or model.get("kind") != "hf" or not model.get("name_or_path"):
        return
    model_type = hf_model_type(model)
    if model_type is not None and not decoder_layer_classes(model_type):
        raise ValueProblem(f"trainer=fsdp shards one unit per decoder layer, and model.name_or_path="
                           f"{model['name_or_path']!r} (model_type {model_type}) has no *DecoderLayer modules; "
                           "use trainer=ddp, or a decoder-layer architecture (Llama, Qwen, Mistral, ...)")


def hf_model_type(model: Mapping) -> str | None:
    """The `model_type` of a Hugging Face config already on disk (None when it cannot be read offline)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model["name_or_path"], local_files_only=not model.get("allow_download"),
                                            trust_remote_code=bool(model.get("trust_remote_code")))
    except (OSError, ValueError):
        return None  # the loader reports a missing model in its own words
    return config.model_type


def decoder_layer_classes(model_type: str) -> list[str]:
    """Names of the *DecoderLayer classes in transformers' modelling module for `model_type`."""
    import importlib

    module_name = model_type.replace("-", "_")
    try:
        module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    except ImportError:
        return ["unknown"]  # custom code (trust_remote_code): not knowable here; fully_shard checks at start
    return [name for name in dir(module) if name.endswith("DecoderLayer")]


def check_ckpt_path(ckpt_path: Any) -> None:
    if ckpt_path in (None, "", "last"):  # "last": Lightning's own lookup in the run folder
        return
    need(isinstance(ckpt_path, str), "ckpt_path", "a path to a .ckpt file", ckpt_path)
    path = Path(ckpt_path).expanduser()
    if not path.is_file():
        raise ValueProblem(f"ckpt_path={ckpt_path!r} is not a file; give a checkpoint such as "
                           "outputs/runs/<run>/checkpoints/last.ckpt")
    from agentcredit.common.checkpoint_file import other_checkpoints, whole_checkpoint_problem

    problem = whole_checkpoint_problem(path)
    if problem:
        raise ValueProblem(f"ckpt_path: {problem}; {other_checkpoints(path)}")
