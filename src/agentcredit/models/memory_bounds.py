"""How much memory a setting's rollouts need, estimated from the config alone and compared with the
machine before any model loads.

    problem = training_memory_problem(data, rollout, model, trainer, credit)   # validation.py
    problem = fidelity_memory_problem(settings, model, rollout, trainer)       # fidelity/run.py

Every live rollout decodes in one batch (agent/rollout.py), and each row keeps its KV cache and its
token records until it ends, so a group size, a continuation count or a batch size sets how many rows
are held at once. `credit_fidelity group_size=100000000` was accepted and grew to 11 GB without finishing
a question. The estimate counts each row at the length its limits allow (turns and observations, at most
rollout.max_context_tokens; not the prompt, the weights or the activations), which most rows never reach:
so it is compared with the machine's whole memory, not with what other processes leave free at this
moment, and a setting is refused only where even an idle machine could not hold its rows at their
limits, in one line that names the knob, the estimate and the limit. (rollout.vllm.kv_cache_gib is
allocated whole when the engine starts: that one is compared with the memory available now,
agent/engines/vllm_settings.py; the machine's figures: agent/machine_memory.py.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentcredit.agent import machine_memory
from agentcredit.agent.machine_memory import gib
from agentcredit.models.shape import attention_shape

# A rollout's token records: input_ids, loss_mask, turn_ids and old_logprobs as Python lists (measured 90 bytes a
# token with tracemalloc on a 10,000-token Trajectory); 80 keeps the estimate below what is held.
TOKEN_RECORD_BYTES = 80
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}


def rollout_memory(trainer: Mapping[str, Any]) -> tuple[int, str] | None:
    """Where rollouts keep their KV cache: the GPU when the run trains on one (and CUDA is usable), else RAM."""
    on_gpu = str(trainer.get("accelerator", "cpu")) in ("gpu", "cuda", "auto")
    return (machine_memory.device_memory() if on_gpu else None) or machine_memory.total_memory()


def row_tokens(rollout: Mapping[str, Any]) -> int:
    """Tokens a row can reach past its prompt: every tool turn and the final turn at their token limit and the
    whole observation budget, at most the context limit."""
    turns = (int(rollout.get("max_tool_turns", 8)) + 1) * int(rollout.get("max_turn_tokens", 96))
    return min(int(rollout.get("max_context_tokens", 4096)), turns + int(rollout.get("max_obs_tokens", 2048)))


def bytes_per_token(model: Mapping[str, Any], rollout: Mapping[str, Any]) -> tuple[int, str]:
    """(bytes, how) one token of a row holds: its records, and with the HF engine its KV cache (a key and a
    value per layer and KV head). vLLM keeps its cache in its own fixed pool (rollout.vllm.kv_cache_gib)."""
    shape = attention_shape(model) if rollout.get("engine", "hf") == "hf" else None
    if shape is None:
        return TOKEN_RECORD_BYTES, f"{TOKEN_RECORD_BYTES} bytes of token records"
    dtype_bytes = DTYPE_BYTES.get(str(model.get("dtype", "float32")), 4)
    kv = 2 * shape.layers * shape.kv_heads * shape.head_dim * dtype_bytes
    return kv + TOKEN_RECORD_BYTES, f"{kv} bytes of KV cache + {TOKEN_RECORD_BYTES} of token records"


def rows_problem(knob: str, rows: int, model: Mapping, rollout: Mapping, limit: tuple[int, str] | None) -> str | None:
    """One line when `rows` rollouts decoded together cannot fit in `limit`; None when they can (or the
    machine does not say how much it has)."""
    if limit is None:
        return None
    tokens = row_tokens(rollout)
    per_token, how = bytes_per_token(model, rollout)
    need = rows * tokens * per_token
    if need <= limit[0]:
        return None
    return (f"{knob} needs up to {gib(need)} for its rollouts ({rows} decoded together x {tokens} tokens of turns "
            f"and observations at their limits x {per_token} bytes: {how}), more than the {gib(limit[0])} of "
            f"{limit[1]}; lower it")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def training_memory_problem(data: Mapping, rollout: Mapping, model: Mapping, trainer: Mapping,
                            credit: Mapping, extra_rollouts: int = 0) -> str | None:
    """A run's largest batches of rows: a step's groups (P questions x G rollouts, plus `extra_rollouts` a group at
    the step that adds most: budget-matched GRPO's), a continuation batch of the credit method (two states x
    num_continuations, ProVer's and SPO's), a validation call and a test call (its batches x k samples each)."""
    limit = rollout_memory(trainer)
    if limit is None:
        return None
    groups, prompts = _int(rollout.get("group_size")), _int(data.get("prompts_per_step"))
    candidates = []
    if groups and prompts:
        extra = f" (+ {extra_rollouts} extra a group)" if extra_rollouts else ""
        candidates.append((f"rollout.group_size={groups}{extra} x data.prompts_per_step={prompts}",
                           (groups + extra_rollouts) * prompts))
    if _int(credit.get("num_continuations")):
        k = credit["num_continuations"]
        candidates.append((f"credit.num_continuations={k} (x 2 states)", 2 * k))
    if prompts and _int(data.get("val_batches_per_call")):
        together = data["val_batches_per_call"]
        candidates.append((f"data.prompts_per_step={prompts} x data.val_batches_per_call={together}", prompts * together))
    batch = _int(data.get("test_batch_size")) or prompts
    if batch:
        together, samples = _int(data.get("test_batches_per_call")) or 1, _int(data.get("test_samples_per_question")) or 1
        knob = (f"data.test_batch_size={batch}" if _int(data.get("test_batch_size")) else f"data.prompts_per_step={batch}")
        knob += f" x data.test_batches_per_call={together}" if together > 1 else ""
        knob += f" x data.test_samples_per_question={samples}" if samples > 1 else ""
        candidates.append((knob + " (a test call)", batch * together * samples))
    for knob, rows in candidates:
        problem = rows_problem(knob, rows, model, rollout, limit)
        if problem:
            return problem
    return None


def fidelity_memory_problem(settings: Mapping, model: Mapping, rollout: Mapping, trainer: Mapping) -> str | None:
    """conf/fidelity.yaml's batches: G rollouts of a question, and the ground truth's continuations (M of each
    state, as many states together as fit in max_batch, at least one: ground_truth.group_truth)."""
    limit = rollout_memory(trainer)
    group, mc, max_batch = _int(settings.get("group_size")), _int(settings.get("mc")), _int(settings.get("max_batch"))
    if group:
        problem = rows_problem(f"group_size={group}", group, model, rollout, limit)
        if problem:
            return problem
    if mc and max_batch:
        rows = mc * max(1, max_batch // mc)
        return rows_problem(f"mc={mc} (with max_batch={max_batch})", rows, model, rollout, limit)
    return None
