"""The frozen reference model π_ref that TRACE scores gold answers with.

By default it is the policy's initial weights (TRACE §3: "a copy of the policy initialization").
Build it right after `load_policy` and before loading any training checkpoint, since a copy of
trained weights would not be the initialisation. Two ways to hold it:

- an own frozen copy (no LoRA, `model.reference.share_base_with_lora=false`, or `model.reference.path`);
  it is registered as a submodule, so it is saved in (and restored from) training checkpoints, and
  it stays in eval mode whatever `.train()` calls reach it;
- with LoRA and `share_base_with_lora: true` (the default), the policy's own frozen base weights with
  the adapters disabled (peft's `disable_adapter()`), saving a second copy of the model. The policy is
  then not registered here, so it is neither saved twice nor put in eval mode by Lightning.

`model.reference.path` may name another checkpoint: a Hugging Face directory (`save_pretrained`
output, full weights) or a Lightning `.ckpt` of this project whose `state_dict` holds the policy under
`policy.`-prefixed keys, with the same architecture and LoRA settings as the current policy.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

_POLICY_PREFIX = "policy."


class ReferenceModel(torch.nn.Module):
    """A causal LM that is never updated: no gradients, eval mode, calls under `torch.no_grad()`."""

    def __init__(self, module: torch.nn.Module | None = None, *, shared_peft_policy: torch.nn.Module | None = None):
        super().__init__()
        if (module is None) == (shared_peft_policy is None):
            raise ValueError("ReferenceModel holds either its own module or a shared PEFT policy, not both")
        self.owned = module
        # A list hides the shared policy from nn.Module registration (state_dict, .train(), .to()).
        self._shared = [shared_peft_policy] if shared_peft_policy is not None else []
        if module is not None:
            module.requires_grad_(False)
            module.eval()

    @property
    def shares_policy_weights(self) -> bool:
        return bool(self._shared)

    @property
    def module(self) -> torch.nn.Module:
        """The underlying causal LM; call it inside `active()` to get reference outputs."""
        return self._shared[0] if self._shared else self.owned

    def train(self, mode: bool = True) -> "ReferenceModel":
        # Lightning calls .train() on every submodule at fit start; the reference must stay in eval.
        return super().train(False)

    @contextlib.contextmanager
    def active(self) -> Iterator[torch.nn.Module]:
        """Yield the module in its reference state: no grad, eval mode, LoRA adapters disabled.

        Use it for direct access (e.g. KV-cache reuse): `with ref.active() as lm: lm(ids, cache=...)`.
        """
        with torch.no_grad():
            if not self._shared:
                self.owned.eval()
                yield self.owned
                return
            policy = self._shared[0]
            modes = {m: m.training for m in policy.modules()}
            policy.eval()
            try:
                with policy.disable_adapter():
                    yield policy
            finally:
                for m, was_training in modes.items():
                    m.training = was_training

    def forward(self, *args: Any, **kwargs: Any):
        """The underlying model's output (e.g. `CausalLMOutputWithPast`) in reference state."""
        with self.active() as lm:
            return lm(*args, **kwargs)

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor:
        """(B, L) ids → (B, L, V) reference logits (or fewer positions with `logits_to_keep`)."""
        return self(input_ids=input_ids, attention_mask=attention_mask, **kwargs).logits


def build_reference(policy: torch.nn.Module, model_cfg: Mapping[str, Any], path: str | None = None) -> ReferenceModel:
    """The frozen reference for `policy`, per `model_cfg.reference` (path, share_base_with_lora).

    `path` overrides `model_cfg.reference.path` (e.g. for a credit config's reference checkpoint).
    """
    ref_cfg = model_cfg.get("reference") or {}
    path = path if path is not None else ref_cfg.get("path")
    is_peft = hasattr(policy, "disable_adapter") and hasattr(policy, "get_base_model")
    if path:
        return ReferenceModel(_load_reference_checkpoint(policy, str(path), is_peft))
    if is_peft and ref_cfg.get("share_base_with_lora", True):
        return ReferenceModel(shared_peft_policy=policy)
    if is_peft:
        # unload() strips the adapters without merging them: the plain base weights remain.
        return ReferenceModel(copy.deepcopy(policy).unload())
    return ReferenceModel(copy.deepcopy(policy))


def _load_reference_checkpoint(policy: torch.nn.Module, path: str, is_peft: bool) -> torch.nn.Module:
    location = Path(path).expanduser()  # as the config check reads it (checks/config_checks.check_reference_path)
    dtype = next(policy.parameters()).dtype
    if location.is_dir():
        if not (location / "config.json").exists():
            raise FileNotFoundError(f"model.reference.path={path!r} has no config.json; save it with save_pretrained()")
        base = policy.get_base_model() if is_peft else policy
        attn = getattr(base.config, "_attn_implementation", "sdpa")
        return AutoModelForCausalLM.from_pretrained(location, dtype=dtype, attn_implementation=attn, local_files_only=True)
    if location.suffix == ".ckpt" and location.is_file():
        # Our own training checkpoints: trusted, and they carry non-tensor hyper-parameters.
        from agentcredit.common.checkpoint_file import read_checkpoint

        checkpoint = read_checkpoint(location, weights_only=False)
        saved = checkpoint.get("state_dict", {})
        state = {k[len(_POLICY_PREFIX) :]: v for k, v in saved.items() if k.startswith(_POLICY_PREFIX)}
        if not state:
            raise ValueError(
                f"model.reference.path={path!r}: its state_dict has no '{_POLICY_PREFIX}' keys; "
                "is it a checkpoint of this project?"
            )
        reference = copy.deepcopy(policy)
        try:
            reference.load_state_dict(state, strict=True)
        except RuntimeError as err:
            first = str(err).splitlines()[1].strip() if len(str(err).splitlines()) > 1 else str(err)
            raise ValueError(f"model.reference.path={path!r} does not match the current model config: {first}") from None
        return reference.merge_and_unload() if is_peft else reference
    raise FileNotFoundError(f"model.reference.path={path!r} is neither a saved model directory nor a .ckpt file")
