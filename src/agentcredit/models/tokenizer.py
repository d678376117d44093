"""A byte-level BPE tokenizer for the tiny testbed model, fitted offline and cached on disk.

It speaks ChatML, like SmolLM2 and Qwen, so the tiny model goes through exactly the same
prompt/rollout code as a real instruct model:

    <|im_start|>{role}\n{content}<|im_end|>\n          (roles: system, user, assistant, tool)

Choices (the real models decide these for themselves):
- eos is `<|im_end|>`: chat models stop a turn on it, so generation stops there too.
- pad is `<|endoftext|>`, never eos, so a mask built from `ids != pad_token_id` keeps real turn ends.
- `<tool_call>`, `</tool_call>`, `<answer>`, `</answer>` are ordinary (non-special) added tokens:
  one id each makes the protocol easy for a small model, and `decode(skip_special_tokens=True)` keeps them.
- no BOS token; the template adds no default system prompt.
- spaces stay glued to the next word (` Greta`), as in GPT-2. A name copied into a query or an
  answer then starts with a different id (`Greta` after a quote or a tag) than in the page. Making
  spaces tokens of their own removes that mismatch but costs 31% more tokens per episode, and it did
  not make the 300-step warm start copy names any better (teacher-forced answer accuracy 0 either
  way). Nor does it make copying appear sooner: trained on first turns only (question -> search
  query, 32 per step, five worlds), held-out queries were exact in 0.66 of cases after 300 steps
  with spaces as tokens and 0.75 with glued spaces. So the cheaper tokenisation stays.
- page titles stay ordinary BPE text. Making every title (and URL) one added token, with titles
  permuted within their type in every training sequence so nothing could be memorised, copied
  worse: on first turns alone, 0-8% exact held-out queries after 400 steps of 32. A title seen a
  few times has an embedding too untrained for attention to find it; BPE pieces are frequent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from agentcredit.models.cache_io import publish_directory
from agentcredit.common.paths import cache_dir, stable_hash

IM_START, IM_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)
PROTOCOL_TOKENS = ("<tool_call>", "</tool_call>", "<answer>", "</answer>")
CHAT_ROLES = ("system", "user", "assistant", "tool")

# ChatML; unknown roles fail loudly instead of rendering a turn the model never saw.
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] not in ['system', 'user', 'assistant', 'tool'] %}"
    "{{ raise_exception('unknown chat role: ' + message['role']) }}"
    "{%- endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Bump when the tokenizer recipe changes, so stale cached tokenizers are not reused.
_RECIPE_VERSION = 3


def texts_fingerprint(texts: Iterable[str]) -> tuple[list[str], str]:
    """Materialise `texts` (it may be a one-shot generator) and hash them in order."""
    digest = hashlib.sha256()
    materialised = []
    for text in texts:
        materialised.append(text)
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return materialised, digest.hexdigest()


def build_tiny_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> PreTrainedTokenizerFast:
    """Fit (or load from the cache) a ChatML byte-level BPE tokenizer on `texts`.

    Cached at `cache_dir()/tokenizers/<stable_hash(texts hash, vocab_size, recipe)>`.
    `vocab_size` counts the BPE merges' vocabulary plus the three special tokens; the four
    protocol tokens come on top, so `len(tokenizer) == vocab_size + 4` once the corpus is big enough.
    """
    if vocab_size < 300:
        raise ValueError(f"tokenizer vocab_size={vocab_size} is too small: byte-level BPE needs at least 259 (use >= 300)")
    materialised, texts_hash = texts_fingerprint(texts)
    if not materialised:
        raise ValueError("the tiny tokenizer needs some text to fit on; the corpus is empty")
    key = stable_hash({"texts": texts_hash, "vocab_size": vocab_size, "recipe": _RECIPE_VERSION})
    target = cache_dir() / "tokenizers" / key
    if (target / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(target)
    tokenizer = _fit(materialised, vocab_size)
    publish_directory(target, tokenizer.save_pretrained, marker="tokenizer.json")
    return tokenizer


def _fit(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in PROTOCOL_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=IM_END,
        pad_token=END_OF_TEXT,
        additional_special_tokens=[IM_START],
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer
