"""The attention shape of the configured policy (layers, KV heads, head size), read without loading
any weights: the tiny model's from `conf/model/tiny.yaml` (or its init_path's config.json), a
Hugging Face model's from its config.json, SmolLM2's from the GGUF header (or its converted
config.json once the cache holds it). The vLLM engine's KV cache check sizes one context from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AttentionShape:
    layers: int
    kv_heads: int
    head_dim: int
    source: str  # where the figures were read, for messages


def attention_shape(model: Mapping[str, Any]) -> AttentionShape | None:
    """The shape of `model` (the `model` config group); None where it cannot be read offline (a hub id
    not in the cache, an unknown kind): the loader then reports the model in its own words."""
    kind = model.get("kind")
    if kind == "tiny":
        if model.get("init_path"):
            return _from_config_file(Path(model["init_path"]) / "config.json")
        return _tiny_shape(model)
    if kind == "smollm2_135m":
        return _smollm2_shape()
    if kind == "hf" and model.get("name_or_path"):
        return _hf_shape(model)
    return None


def _tiny_shape(model: Mapping[str, Any]) -> AttentionShape | None:
    try:
        layers, heads = int(model["num_layers"]), int(model["num_heads"])
        kv_heads, hidden = int(model.get("num_kv_heads", heads)), int(model["hidden_size"])
    except (KeyError, TypeError, ValueError):
        return None  # the model group's own checks name the bad value
    if heads < 1:
        return None
    return AttentionShape(layers, kv_heads, hidden // heads, "model.num_layers/num_kv_heads/hidden_size/num_heads")


def shape_of_config(config: Mapping[str, Any], source: str) -> AttentionShape | None:
    """From a Hugging Face config.json's keys (a multimodal config's `text_config` where it has one)."""
    config = config.get("text_config") or config
    try:
        layers, heads = int(config["num_hidden_layers"]), int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None  # an architecture named otherwise (GPT-2's n_layer, ...): vLLM checks it itself
    return AttentionShape(layers, kv_heads, head_dim, source)


def _from_config_file(path: Path) -> AttentionShape | None:
    try:
        return shape_of_config(json.loads(path.read_text()), str(path))
    except (OSError, ValueError):
        return None


def _hf_shape(model: Mapping[str, Any]) -> AttentionShape | None:
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model["name_or_path"], local_files_only=not model.get("allow_download"),
                                            trust_remote_code=bool(model.get("trust_remote_code")))
    except (OSError, ValueError):
        return None
    return shape_of_config(config.to_dict(), f"{model['name_or_path']}'s config.json")


def _smollm2_shape() -> AttentionShape | None:
    from agentcredit.models.loading import smollm2_converted_dir, smollm2_gguf_path

    try:
        gguf = smollm2_gguf_path()
    except (ModuleNotFoundError, FileNotFoundError):
        return None  # the loader says how to install it
    converted = smollm2_converted_dir(gguf) / "config.json"
    if converted.is_file():  # ~2 s faster than parsing the GGUF header
        return _from_config_file(converted)
    from gguf import GGUFReader  # the header only: the tensors are memory-mapped, never read

    fields = GGUFReader(gguf).fields

    def value(key: str) -> int:
        field = fields[f"llama.{key}"]
        return int(field.parts[field.data[0]][0])

    heads = value("attention.head_count")
    return AttentionShape(value("block_count"), value("attention.head_count_kv"), value("embedding_length") // heads,
                          f"{gguf.name}'s header")
