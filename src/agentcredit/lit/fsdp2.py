"""FSDP2 (`torch.distributed.fsdp.fully_shard`) through Lightning's ModelParallelStrategy.

    strategy = FSDP2Strategy(param_dtype="bfloat16", activation_checkpointing=True)   # compose.build_strategy
    trainer = L.Trainer(strategy=strategy, accelerator="cpu", devices=2)             # gloo on CPU, nccl on GPUs

The policy is sharded by `AgentRLModule.configure_model`, which calls `strategy.shard_policy`: one
FSDP unit per decoder layer, then the root (embeddings, final norm, head). Every process holds 1/world
of each parameter as a DTensor. The frozen TRACE reference is not sharded: each process keeps a full
replica (it is never updated, so there is nothing to synchronise).

Rollouts are the one place where processes do different amounts of work (each samples its own
questions, to different lengths), so sharded forwards there would deadlock the all-gathers;
`FullWeights(policy)` gathers every parameter once before sampling and frees the copies after.
Checkpoints are written whole by rank 0 (`save_distributed_checkpoint=False`): the same file layout
as one process, read by scripts/evaluate.py and by a resume on any number of processes.
"""

from __future__ import annotations

import torch
from lightning.pytorch.strategies import ModelParallelStrategy

from agentcredit.common.configs import ConfigError

DTYPES = {None: None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def decoder_layers(policy: torch.nn.Module) -> list[torch.nn.Module]:
    """The policy's transformer blocks (LlamaDecoderLayer, Qwen3DecoderLayer, ...), in order: FSDP's units."""
    return [m for m in policy.modules() if type(m).__name__.endswith("DecoderLayer")]


class FSDP2Strategy(ModelParallelStrategy):
    """Pure data-parallel FSDP2: a 1-D mesh over all processes (no tensor parallelism)."""

    def __init__(self, *, param_dtype: str | None = None, reduce_dtype: str | None = None, cpu_offload: bool = False,
                 activation_checkpointing: bool = False, reshard_after_forward: bool = True, **kwargs):
        # Whole checkpoints: one file, readable by evaluate.load_policy_weights and by any world size.
        super().__init__(save_distributed_checkpoint=False, **kwargs)
        self.param_dtype = DTYPES[param_dtype]
        self.reduce_dtype = DTYPES[reduce_dtype]
        self.cpu_offload = cpu_offload
        self.activation_checkpointing = activation_checkpointing
        self.reshard_after_forward = reshard_after_forward

    def setup_environment(self) -> None:
        # All processes shard one data-parallel dimension; "auto" would make it tensor parallel within a node.
        self._data_parallel_size = self.num_nodes * self.num_processes
        self._tensor_parallel_size = 1
        super().setup_environment()

    def load_checkpoint(self, checkpoint_path, weights_only: bool | None = None) -> dict:
        # Lightning's FSDP2 loader fills the model as it reads, before the module's on_load_checkpoint: the
        # integrity digest and the shapes are checked here first, so a damaged file or another model is one line.
        from agentcredit.common.checkpoint_file import CheckpointError, read_checkpoint, resume_problem, state_dict_problem

        path = self.broadcast(checkpoint_path)
        checkpoint = read_checkpoint(path, weights_only=weights_only)
        module = self.lightning_module
        fitting = getattr(module.trainer.state.fn, "value", None) == "fit"
        expected = module.state_dict()  # DTensor entries report the whole parameter's shape
        problem = (resume_problem(expected, checkpoint, module.strict_loading) if fitting
                   else state_dict_problem(expected, checkpoint.get("state_dict"), module.strict_loading))
        if problem:
            raise CheckpointError(f"{path} cannot be loaded into this run: {problem}; resume with the model "
                                  "overrides the run was trained with, from a checkpoint train.py wrote")
        del checkpoint
        return super().load_checkpoint(path, weights_only=weights_only)

    def shard_policy(self, policy: torch.nn.Module) -> None:
        """Called by the module's configure_model, once the process group and mesh exist."""
        shard_policy(policy, self.device_mesh["data_parallel"], param_dtype=self.param_dtype,
                     reduce_dtype=self.reduce_dtype, cpu_offload=self.cpu_offload,
                     activation_checkpointing=self.activation_checkpointing,
                     reshard_after_forward=self.reshard_after_forward)


def shard_policy(policy: torch.nn.Module, mesh, *, param_dtype: torch.dtype | None = None,
                 reduce_dtype: torch.dtype | None = None, cpu_offload: bool = False,
                 activation_checkpointing: bool = False, reshard_after_forward: bool = True) -> None:
    """fully_shard each decoder layer, then the root, over the 1-D `mesh`; a no-op when already sharded
    (Lightning calls configure_model again for a test after fit)."""
    from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, fully_shard

    if isinstance(policy, FSDPModule):
        return
    layers = decoder_layers(policy)
    if not layers:
        raise ConfigError(f"trainer=fsdp shards one unit per decoder layer, and {type(policy).__name__} has no "
                          "*DecoderLayer modules; use trainer=ddp")
    if activation_checkpointing:
        # Hugging Face's own checkpointing keeps the parameter names (a wrapper module would rename them).
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    options = {"mesh": mesh, "reshard_after_forward": reshard_after_forward,
               "mp_policy": MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)}
    if cpu_offload:
        options["offload_policy"] = CPUOffloadPolicy()
    for layer in layers:
        fully_shard(layer, **options)
    fully_shard(policy, **options)


def fsdp_units(policy: torch.nn.Module) -> list[torch.nn.Module]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in policy.modules() if isinstance(m, FSDPModule)]


class FullWeights:
    """Every parameter of a sharded policy gathered whole until `release()` (or the end of a `with`);
    nothing happens for a policy that is not sharded.

    While gathered, forwards issue no collective, so processes may run different numbers of them
    (sampling); on release the gathered copies are freed and each unit reshards after forwards again."""

    def __init__(self, policy: torch.nn.Module):
        self.units = fsdp_units(policy)
        self.settings = [reshards_after_forward(unit) for unit in self.units]
        for unit in self.units:
            unit.set_reshard_after_forward(False, recurse=False)
            unit.unshard()

    def release(self) -> None:
        for unit, setting in zip(self.units, self.settings):
            unit.reshard()
            unit.set_reshard_after_forward(setting, recurse=False)
        self.units = []

    def __enter__(self) -> "FullWeights":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def reshards_after_forward(unit) -> bool:
    # fully_shard keeps the root gathered after its forward (backward needs it at once); keep each unit's choice.
    group = unit._get_fsdp_state()._fsdp_param_group
    return group is None or group.post_forward_mesh_info is not None


def clip_gradients(parameters, max_norm: float) -> torch.Tensor:
    """`clip_grad_norm_` that also takes sharded (DTensor) gradients: the norm over all shards, as a
    plain tensor equal on every process."""
    from torch.distributed.tensor import DTensor

    params = [p for p in parameters if p.grad is not None]
    grads = [p.grad for p in params]
    total = torch.nn.utils.get_total_norm(grads)
    if isinstance(total, DTensor):
        total = total.full_tensor()  # the per-shard norms combined across processes
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total
