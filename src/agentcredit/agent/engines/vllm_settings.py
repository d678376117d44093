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
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from agentcredit.common.cpuinfo import usable_cores

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
    return usable_cores(), "CPU core(s)"


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
    if s.kv_cache_gib is not None and not (_number(s.kv_cache_gib) and math.isfinite(s.kv_cache_gib)
                                           and s.kv_cache_gib > 0):
        return f"kv_cache_gib must be null or a finite number > 0, got {s.kv_cache_gib!r}"
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



# Bytes per element of the engine's dtype names (vLLM's and torch's).
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
# Tokens per KV cache block where extra.block_size does not say: vLLM's CPU platform sets 128; on CUDA
# 16 is vLLM's default (some attention backends take larger blocks, so there it is a lower bound).
CPU_BLOCK_SIZE, CUDA_BLOCK_SIZE = 128, 16


def kv_cache_bytes(*, layers: int, kv_heads: int, head_dim: int, dtype_bytes: int, tokens: int,
                   tensor_parallel_size: int = 1) -> int:
    """KV cache bytes `tokens` tokens take on one engine worker: a key and a value vector (2) per
    layer, KV head and token. With tensor parallelism each worker holds kv_heads / tp heads (at
    least one: vLLM replicates a head rather than split it)."""
    heads = max(1, kv_heads // tensor_parallel_size)
    return 2 * layers * heads * head_dim * dtype_bytes * tokens


def engine_cache_tokens(context_tokens: int, block_size: int) -> int:
    """Tokens of cache vLLM must allocate to admit one request of `context_tokens`: whole blocks, plus
    the one null block its block pool always keeps (measured: the tiny model at 4096 tokens, 128-token
    blocks, 3072 bytes a token, is refused with 12.29 MiB of cache and starts with 12.39 MiB = 33 blocks)."""
    return (math.ceil(context_tokens / block_size) + 1) * block_size


def block_size(s: VLLMSettings) -> int:
    given = s.extra.get("block_size")
    if _int(given) and given > 0:
        return given
    import torch

    return CUDA_BLOCK_SIZE if torch.cuda.is_available() else CPU_BLOCK_SIZE


def kv_cache_machine_problem(s: VLLMSettings) -> str | None:
    """Whether the machine has `kv_cache_gib` at all: vLLM allocates the whole cache when the engine starts,
    after the policy has loaded (kv_cache_gib=1e30 failed there with a 105-line traceback). On CUDA the cache
    goes on the device, so its memory is the limit; on CPU it is the RAM available now."""
    from agentcredit.agent.machine_memory import available_memory, device_memory, gib

    if s.kv_cache_gib is None:
        return None
    limit = device_memory() or available_memory()
    want = s.kv_cache_gib * 2**30
    if limit is None or want <= limit[0]:
        return None
    return (f"rollout.vllm.kv_cache_gib={s.kv_cache_gib:g} ({gib(want)}) is more than the {gib(limit[0])} of "
            f"{limit[1]}; set rollout.vllm.kv_cache_gib to at most {math.floor(limit[0] / 2**30 * 100) / 100:g}")


def kv_cache_problem(s: VLLMSettings, *, layers: int, kv_heads: int, head_dim: int, model_dtype: str,
                     max_context_tokens: int, block: int, source: str) -> str | None:
    """Whether `kv_cache_gib` holds one full context (rollout.max_context_tokens, the engine's
    max_model_len) in `block`-token blocks, which vLLM checks only once the policy has loaded and the
    engine starts. With kv_cache_gib null the cache is a share of the GPU's free memory, which is only
    known once the model is on it."""
    if s.kv_cache_gib is None:
        return None
    dtype = model_dtype if s.dtype in (None, "auto") else s.dtype
    cache_dtype = str(s.extra.get("kv_cache_dtype", "auto"))
    label = dtype if cache_dtype == "auto" else cache_dtype
    dtype_bytes = 1 if cache_dtype.startswith("fp8") else DTYPE_BYTES.get(label)
    if dtype_bytes is None:
        return None  # a dtype other checks refuse, or one vLLM names otherwise: it checks the cache itself
    tokens = engine_cache_tokens(max_context_tokens, block)
    need = kv_cache_bytes(layers=layers, kv_heads=kv_heads, head_dim=head_dim, dtype_bytes=dtype_bytes,
                          tokens=tokens, tensor_parallel_size=s.tensor_parallel_size)
    have = s.kv_cache_gib * 2**30
    if need <= have:
        return None
    per_worker = f" / tensor_parallel_size {s.tensor_parallel_size}" if s.tensor_parallel_size > 1 else ""
    return (f"rollout.vllm.kv_cache_gib={s.kv_cache_gib} ({have / 2**20:.2f} MiB) cannot hold one full context: "
            f"rollout.max_context_tokens={max_context_tokens} takes {tokens} tokens of cache ({block}-token blocks "
            f"and vLLM's null block) x 2 x {layers} layers x {kv_heads} KV heads{per_worker} x {head_dim} head dim "
            f"x {dtype_bytes} bytes ({label}) = {need / 2**20:.2f} MiB (shape from {source}); set "
            f"rollout.vllm.kv_cache_gib to at least {math.ceil(need / 2**30 * 10000) / 10000:g} "
            "or lower rollout.max_context_tokens")
