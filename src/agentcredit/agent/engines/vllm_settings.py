"""`rollout.vllm.*`: the colocated vLLM engine's settings, checked before any model loads.

vLLM itself checks its arguments only when the engine is built, at the first rollout, after the
policy (and its warm start) has loaded, and then fails with a long traceback. Everything that can
be known from the config alone is checked here instead, one line each: types and ranges, a dtype
vLLM accepts, a tensor-parallel size the machine has devices (or cores) for, and every key of
`extra` against the arguments `vllm.LLM` takes, read from vLLM's source without importing it
(importing vLLM costs about 12 s on a CPU machine).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

# vLLM's --dtype choices.
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# Arguments the engine passes to vllm.LLM itself (vllm_engine.VLLMEngine); `extra` must not repeat them.
SET_BY_ENGINE = ("model", "tokenizer", "dtype", "seed", "enforce_eager", "max_model_len", "enable_prefix_caching",
                 "logprobs_mode", "max_num_seqs", "gpu_memory_utilization", "tensor_parallel_size",
                 "enable_sleep_mode", "disable_log_stats", "kv_cache_memory_bytes")


@dataclass
class VLLMSettings:
    multiprocess: bool = False  # false: the engine core runs in this process (~5 s start on CPU instead of ~40 s)
    kv_cache_gib: float | None = 1.0  # KV cache size; null leaves it to gpu_memory_utilization (GPU)
    gpu_memory_utilization: float = 0.5  # GPU share for weights + KV cache (CPU: ignored while kv_cache_gib is set)
    tensor_parallel_size: int = 1
    sleep_level: int = 0  # GPU: 1 or 2 frees the engine's memory while the trainer updates (0: off; no effect on CPU)
    dtype: str | None = None  # null = the policy's dtype (keep float32 on CPU: bf16 falls back to slow kernels)
    enforce_eager: bool = True  # no CUDA graphs / compilation: faster start, and the only mode used on CPU
    enable_prefix_caching: bool = True
    max_num_seqs: int = 256
    extra: dict = field(default_factory=dict)  # passed to vllm.LLM as is

    def __post_init__(self):
        problem = settings_problem(self)
        if problem:
            raise ValueError(f"rollout.vllm.{problem}")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def available_devices() -> tuple[int, str]:
    """(how many, what): CUDA devices where CUDA is usable, else the CPU cores this process may run on."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.device_count(), "CUDA device(s)"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores, "CPU core(s)"


@functools.lru_cache(maxsize=1)
def llm_argument_names() -> frozenset[str] | None:
    """Keyword arguments `vllm.LLM(...)` accepts: its own parameters and the fields of EngineArgs, which
    its **kwargs fill. None where vLLM is missing or its source is laid out otherwise (the engine then
    reports an unknown key itself)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return None
    root = Path(spec.origin).parent
    try:
        engine_args = _class(ast.parse((root / "engine" / "arg_utils.py").read_text()), "EngineArgs")
        llm = _class(ast.parse((root / "entrypoints" / "llm.py").read_text()), "LLM")
    except (OSError, SyntaxError, LookupError):
        return None
    names = {n.target.id for n in engine_args.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    init = next(n for n in llm.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    names |= {a.arg for a in init.args.args + init.args.kwonlyargs if a.arg != "self"}
    return frozenset(names) if len(names) > 20 else None  # a handful means the layout is not the one read here


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    if not found:
        raise LookupError(name)
    return found[0]


def settings_problem(s: VLLMSettings) -> str | None:
    """What is wrong with the settings, as `<key> must be ..., got ...` (without the rollout.vllm. prefix)."""
    for key in ("multiprocess", "enforce_eager", "enable_prefix_caching"):
        if not isinstance(getattr(s, key), bool):
            return f"{key} must be true or false, got {getattr(s, key)!r}"
    if s.kv_cache_gib is not None and not (_number(s.kv_cache_gib) and s.kv_cache_gib > 0):
        return f"kv_cache_gib must be null or a number > 0, got {s.kv_cache_gib!r}"
    if not (_number(s.gpu_memory_utilization) and 0 < s.gpu_memory_utilization <= 1):
        return f"gpu_memory_utilization must be a number in (0, 1], got {s.gpu_memory_utilization!r}"
    if s.sleep_level not in (0, 1, 2) or isinstance(s.sleep_level, bool):
        return f"sleep_level must be 0, 1 or 2, got {s.sleep_level!r}"
    if not (_int(s.max_num_seqs) and s.max_num_seqs >= 1):
        return f"max_num_seqs must be an integer >= 1, got {s.max_num_seqs!r}"
    if s.dtype is not None and s.dtype not in DTYPES:
        return f"dtype must be null (the policy's) or one of {list(DTYPES)}, got {s.dtype!r}"
    if not (_int(s.tensor_parallel_size) and s.tensor_parallel_size >= 1):
        return f"tensor_parallel_size must be an integer >= 1, got {s.tensor_parallel_size!r}"
    if s.tensor_parallel_size > 1:
        have, what = available_devices()
        if s.tensor_parallel_size > have:
            return (f"tensor_parallel_size must be at most the {have} {what} of this machine, "
                    f"got {s.tensor_parallel_size}")
    return extra_problem(s.extra)


def extra_problem(extra: Any) -> str | None:
    if not isinstance(extra, Mapping):
        return f"extra must be a mapping of vllm.LLM arguments, got {extra!r}"
    for key in extra:
        if key in SET_BY_ENGINE:
            own = next((f.name for f in fields(VLLMSettings) if f.name == key), None)
            instead = f"set rollout.vllm.{own}" if own else "the engine sets it from the run's config"
            return f"extra.{key} is set by the engine itself; {instead}"
    known = llm_argument_names()
    unknown = sorted(str(k) for k in extra if known is not None and k not in known)
    if unknown:
        return f"extra.{unknown[0]} is not an argument of vllm.LLM (see vllm.engine.arg_utils.EngineArgs)"
    return None


def vllm_settings(values: Mapping) -> VLLMSettings:
    """VLLMSettings from `rollout.vllm`, with an unknown key as one ValueError line."""
    known = [f.name for f in fields(VLLMSettings)]
    unknown = sorted(str(k) for k in values if k not in known)
    if unknown:
        raise ValueError(f"rollout.vllm.{unknown[0]} is not a setting; known: {', '.join(known)}")
    return VLLMSettings(**values)
