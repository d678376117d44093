"""Policy and frozen-reference models (tiny testbed, SmolLM2 GGUF, any HF model), LoRA, TRACE scoring."""

from agentcredit.models.loading import load_policy, smollm2_gguf_path, torch_dtype, wrap_with_lora
from agentcredit.models.reference import ReferenceModel, build_reference
from agentcredit.models.reference_scorer import ScoringItem, score_batch, score_fast, score_naive
from agentcredit.models.tiny import build_tiny_model
from agentcredit.models.tokenizer import CHATML_TEMPLATE, build_tiny_tokenizer

__all__ = [
    "CHATML_TEMPLATE",
    "ReferenceModel",
    "ScoringItem",
    "build_reference",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "load_policy",
    "score_batch",
    "score_fast",
    "score_naive",
    "smollm2_gguf_path",
    "torch_dtype",
    "wrap_with_lora",
]
