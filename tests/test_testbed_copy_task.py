"""testbed/copy_task.py: the two copy tasks are laid out as documented; scripts/research/probe_copying.py learns one."""

import subprocess
import sys

import pytest
import torch

from agentcredit.testbed import copy_task
from test_scripts import ROOT, run_json


def test_offset_rows_repeat_a_fixed_span_and_score_its_tail():
    batch = copy_task.copy_batch("offset", 3, pool=50, span_min=2, span_max=4, noise=5,
                                 generator=torch.Generator().manual_seed(0))
    ids, mask = batch["input_ids"], batch["loss_mask"]
    assert ids.shape == (3, 8) and bool(batch["attention_mask"].all())
    assert torch.equal(ids[:, :4], ids[:, 4:])
    # Positions 5, 6, 7: the second span after its first token.
    assert mask.tolist() == [[0, 0, 0, 0, 0, 1, 1, 1]] * 3
    assert int(ids.min()) >= copy_task.FIRST_ID and int(ids.max()) < copy_task.FIRST_ID + 50


def test_content_rows_vary_noise_and_span_and_are_padded():
    batch = copy_task.copy_batch("content", 64, pool=50, span_min=2, span_max=5, noise=3,
                                 generator=torch.Generator().manual_seed(1))
    lengths = batch["attention_mask"].sum(1)
    spans = batch["loss_mask"].sum(1) + 1
    noise = lengths - 2 * spans
    assert set(spans.long().tolist()) == {2, 3, 4, 5} and set(noise.long().tolist()) == {0, 1, 2, 3}
    for row, length, span in zip(batch["input_ids"], lengths.long(), spans.long()):
        assert torch.equal(row[length - span : length], row[length - 2 * span : length - span])
        assert bool((row[length:] == copy_task.PAD_ID).all())
    # The loss never falls on padding.
    assert bool((batch["loss_mask"] <= batch["attention_mask"]).all())


def test_unknown_task_and_short_span_are_errors():
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="unknown copy task"):
        copy_task.copy_batch("pointer", 1, 10, 2, 3, 0, generator)
    with pytest.raises(ValueError, match="span_min"):
        copy_task.copy_batch("offset", 1, 10, 1, 3, 0, generator)


def test_the_tiny_model_learns_the_fixed_offset_copy():
    # If the loss positions were off by one, no model could learn this; the tiny one does in seconds.
    out = run_json("scripts/research/probe_copying.py", "--tasks", "offset", "--steps", "100", "--batch-size", "32", "--eval-every", "50",
                   "--threads", "1")
    assert out["tasks"]["offset"]["final_token_accuracy"] >= 0.9
    assert [point["step"] for point in out["tasks"]["offset"]["curve"]] == [50, 100]
    assert out["chance_loss"] == pytest.approx(7.601, abs=1e-3)


@pytest.mark.parametrize("args, message", [
    (["--tasks", "pointer"], "--tasks 'pointer'"),
    (["--", "model.num_heads=3"], "must be divisible"),
])
def test_bad_probe_arguments_are_one_line_errors(args, message):
    done = subprocess.run([sys.executable, "scripts/research/probe_copying.py", "--steps", "1", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
