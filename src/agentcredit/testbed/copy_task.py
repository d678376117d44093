"""Synthetic in-context copying rows: what `scripts/research/probe_copying.py` trains a model config on.

Every answer of the synthetic world except a count (a name, a town, a title) is written only in
observations, so a base policy has to copy it out of its context, and so does every search for a
bridge entity. These rows measure that skill apart from the search task.

Two tasks on random token ids:
- `offset`: a span of `span_max` ids, then the same span again. The copy is always the same
  distance back, so one head can learn it from relative position alone. This is the copy the
  tiny policy does learn: the question's entity into its first query.
- `content`: noise of 0..`noise` ids, a span of `span_min`..`span_max` ids, then the span again.
  The distance varies, so the earlier occurrence must be found by its content (an induction head),
  as a name on a page must be for a query or an answer.
The loss is on the repeated span after its first token (the first cannot be predicted).
"""

from __future__ import annotations

import torch

from agentcredit.agent.trajectory import pad_rows

FIRST_ID = 3  # ids below are pad / eos / special in the tiny tokenizer; copy rows never draw them
PAD_ID = 0


def copy_batch(task: str, batch_size: int, pool: int, span_min: int, span_max: int, noise: int,
               generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Rows `noise | span | span` of ids in [FIRST_ID, FIRST_ID + pool), right-padded with PAD_ID;
    loss_mask is 1 on the second span's tokens after its first."""
    if task not in ("offset", "content"):
        raise ValueError(f"unknown copy task {task!r}; use offset or content")
    if not 2 <= span_min <= span_max:
        raise ValueError(f"need 2 <= span_min <= span_max, got {span_min}, {span_max}")
    rows, masks = [], []
    for _ in range(batch_size):
        if task == "offset":
            span_len, noise_len = span_max, 0
        else:
            span_len = int(torch.randint(span_min, span_max + 1, (1,), generator=generator))
            noise_len = int(torch.randint(0, noise + 1, (1,), generator=generator))
        ids = torch.randint(FIRST_ID, FIRST_ID + pool, (noise_len + span_len,), generator=generator)
        rows.append(torch.cat([ids, ids[noise_len:]]))
        masks.append(torch.cat([torch.zeros(noise_len + span_len + 1), torch.ones(span_len - 1)]))
    return pad_rows(list(zip(rows, masks)), PAD_ID)


@torch.no_grad()
def copy_accuracy(model, batch: dict[str, torch.Tensor]) -> tuple[float, float]:
    """(mean loss, token accuracy) of greedy predictions on the batch's loss positions."""
    was_training = model.training
    model.eval()
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].float()
    targets = batch["input_ids"][:, 1:]
    keep = batch["loss_mask"][:, 1:].bool()
    loss = torch.nn.functional.cross_entropy(logits[keep], targets[keep])
    accuracy = (logits.argmax(-1)[keep] == targets[keep]).float().mean()
    model.train(was_training)
    return float(loss), float(accuracy)
