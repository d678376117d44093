"""Damaged checkpoints are one line naming the file; a non-finite step stops before last.ckpt is
written (issue 20, item 4)."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest
import torch

from agentcredit.common.checkpoint_file import INTEGRITY_KEY, CheckpointError, checkpoint_digest, read_checkpoint
from agentcredit.lit.checkpoint_io import VerifiedCheckpointIO
from tiny_runs import SIGNAL, hydra_cli, train_tiny

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RUN = [*SIGNAL, "trainer.max_steps=2", "trainer.val_check_interval=2", "checkpoint.every_n_steps=1"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, signal_credit):
    out = tmp_path_factory.mktemp("run")
    train_tiny(out, *RUN)
    return out


def load(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def resave(checkpoint, path):
    """Written the way training writes it, so its digest is valid whatever it holds."""
    VerifiedCheckpointIO().save_checkpoint(checkpoint, path)
    return path


def overwrite_middle(src, dst):
    data = bytearray(src.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4] = b"\xff\xff\xff\xff"  # float32 NaN, wherever it lands in a tensor
    dst.write_bytes(bytes(data))
    return dst


def nan_in_adam(src, dst):
    checkpoint = load(src)
    state = checkpoint["optimizer_states"][0]["state"]
    next(iter(state.values()))["exp_avg_sq"].view(-1)[0] = float("nan")
    return resave(checkpoint, dst)


def inf_in_weights(src, dst):
    checkpoint = load(src)
    key = next(k for k in checkpoint["state_dict"] if k.startswith("policy."))
    checkpoint["state_dict"][key].view(-1)[0] = float("inf")
    return resave(checkpoint, dst)


def not_a_checkpoint(src, dst):
    torch.save([1, 2, 3], dst)
    return dst


DAMAGE = {
    "4 bytes overwritten": (overwrite_middle, r"is corrupted: its content no longer matches the digest"),
    "truncated to half": (lambda s, d: d.write_bytes(s.read_bytes()[: s.stat().st_size // 2]) and d,
                          r"cannot be read: truncated or corrupted"),
    "truncated to 100 bytes": (lambda s, d: d.write_bytes(s.read_bytes()[:100]) and d, r"cannot be read: truncated or corrupted"),
    "empty": (lambda s, d: d.write_bytes(b"") or d, r"is empty \(0 bytes\)"),
    "text": (lambda s, d: d.write_text("not a checkpoint\n") and d, r"cannot be read: truncated or corrupted"),
    "NaN in Adam state": (nan_in_adam, r"holds non-finite values \(NaN or inf\) in optimizer_states"),
    "inf in weights": (inf_in_weights, r"holds non-finite values \(NaN or inf\) in state_dict\.policy\."),
    "a list": (not_a_checkpoint, r"is not a checkpoint of this project"),
}


def test_checkpoints_carry_a_digest_of_their_content(run_dir):
    checkpoint = load(run_dir / "checkpoints" / "last.ckpt")
    assert checkpoint[INTEGRITY_KEY]["sha256"] == checkpoint_digest(checkpoint)
    assert read_checkpoint(run_dir / "checkpoints" / "step1.ckpt")["global_step"] == 1


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_checkpoint_is_one_line_naming_the_file(run_dir, tmp_path, case):
    damage, message = DAMAGE[case]
    bad = damage(run_dir / "checkpoints" / "last.ckpt", tmp_path / "bad.ckpt")
    with pytest.raises(CheckpointError) as err:
        VerifiedCheckpointIO().load_checkpoint(bad)
    text = str(err.value)
    assert text.startswith(str(bad)) and "\n" not in text, text
    assert __import__("re").search(message, text), text


def test_a_damaged_checkpoint_names_the_checkpoints_beside_it_and_cuts_no_sentence(run_dir, tmp_path):
    """The hint pointed at checkpoints/step<N>.ckpt whether or not one existed, after torch's text cut at 160
    characters mid-word ("...there is a high)")."""
    import os
    import shutil

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    half = run_dir / "checkpoints" / "last.ckpt"
    (folder / "last.ckpt").write_bytes(half.read_bytes()[: half.stat().st_size // 2])
    with pytest.raises(CheckpointError) as alone:
        read_checkpoint(folder / "last.ckpt")
    assert str(alone.value).endswith("; no other checkpoint lies beside it"), alone.value
    assert "there is a high)" not in str(alone.value)
    for step, age in (("step1.ckpt", 100), ("step2.ckpt", 50)):
        shutil.copy(run_dir / "checkpoints" / "step1.ckpt", folder / step)
        os.utime(folder / step, (1e9 - age, 1e9 - age))
    with pytest.raises(CheckpointError) as beside:
        read_checkpoint(folder / "last.ckpt")
    assert str(beside.value).endswith("; other checkpoints beside it, newest first: step2.ckpt, step1.ckpt (give one "
                                      "as ckpt_path=)"), beside.value


def test_the_first_sentence_of_an_error_is_cut_where_it_ends():
    from agentcredit.common.checkpoint_file import _first_sentence

    assert _first_sentence("\nPytorchStreamReader failed. If you are seeing this error, there is a high chance") == \
        "PytorchStreamReader failed."
    assert _first_sentence("x" * 200) == "x" * 159 + "…"
    assert _first_sentence("short one") == "short one"


# `python train.py` at the tiny sizes of the run being resumed (its command line, as a user types it).
RESUME_CLI = ["model.warm_start=false", "model.hidden_size=64", "model.num_layers=2", "model.num_heads=2",
              "model.num_kv_heads=2", "model.intermediate_size=128", "model.vocab_size=800", "rollout.group_size=2",
              "rollout.max_tool_turns=2", "rollout.max_turn_tokens=16", "rollout.max_obs_tokens=128",
              "env.retriever=bm25", "env.default_topn=3", "data.n_val=2", "data.prompts_per_step=2",
              "trainer.max_steps=3", "trainer.limit_val_batches=1", "trainer.enable_progress_bar=false", "logger=none"]


def test_resuming_from_a_damaged_checkpoint_stops_in_one_line(run_dir, tmp_path, capsys):
    bad = overwrite_middle(run_dir / "checkpoints" / "last.ckpt", tmp_path / "bad.ckpt")
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(out):
        hydra_cli(*RUN, *RESUME_CLI, f"ckpt_path={bad}", f"hydra.run.dir={tmp_path / 'run'}")
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(f"checkpoint error: {bad} is corrupted"), lines
    assert "Restored all states" not in out.getvalue()


def test_a_truncated_checkpoint_is_refused_before_any_model_loads(run_dir, tmp_path, capsys, monkeypatch):
    """ckpt_path= to a truncated file: a config error (exit 2) from the file's size and zip end record alone; a run
    folder whose own last.ckpt is truncated, under resume=true: a checkpoint error before the policy is built. Neither
    names the damaged step checkpoint beside it as somewhere to continue from."""
    import shutil

    from agentcredit.lit.run_folder import FINISHED_MARK
    from agentcredit.run import compose

    def no_model(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(compose, "build_components", no_model)
    whole = run_dir / "checkpoints" / "last.ckpt"
    bad = tmp_path / "bad" / "last.ckpt"
    bad.parent.mkdir()
    bad.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    (bad.parent / "step0.ckpt").write_bytes(b"")  # damaged too: not offered
    shutil.copy(run_dir / "checkpoints" / "step1.ckpt", bad.parent / "step1.ckpt")
    with pytest.raises(SystemExit) as stop:
        hydra_cli(*RUN, *RESUME_CLI, f"ckpt_path={bad}", f"hydra.run.dir={tmp_path / 'run'}")
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and lines == [f"config error: ckpt_path: {bad} is not a whole checkpoint (truncated, or "
                                              "not written by torch.save); other checkpoints beside it, newest first: "
                                              "step1.ckpt (give one as ckpt_path=)"], lines
    folder = tmp_path / "resumed"
    shutil.copytree(run_dir, folder)
    (folder / FINISHED_MARK).unlink(missing_ok=True)  # stopped before its test: resume=true continues it
    (folder / "checkpoints" / "last.ckpt").write_bytes(whole.read_bytes()[:100])
    with pytest.raises(SystemExit) as stop:
        hydra_cli(*RUN, *RESUME_CLI, "resume=true", f"hydra.run.dir={folder}")
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"checkpoint error: {folder / 'checkpoints' / 'last.ckpt'} is not a whole checkpoint"), lines


def test_a_checkpoint_from_before_digests_loads_with_one_warning(run_dir, tmp_path, caplog):
    checkpoint = load(run_dir / "checkpoints" / "last.ckpt")
    del checkpoint[INTEGRITY_KEY]
    torch.save(checkpoint, tmp_path / "old.ckpt")
    with caplog.at_level(logging.WARNING, logger="agentcredit.common.checkpoint_file"):
        assert read_checkpoint(tmp_path / "old.ckpt", weights_only=False)["global_step"] == 2
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path / 'old.ckpt'} carries no integrity digest (written before digests existed); loading it unchecked"]


def test_a_non_finite_loss_stops_the_run_before_last_ckpt_is_written(tmp_path, monkeypatch, signal_credit):
    from agentcredit.lit import module as lit_module

    real_loss, real_step = lit_module.policy_loss, lit_module.AgentRLModule.training_step
    steps = {"n": 0}

    def counting_step(self, *args, **kwargs):  # a step may call the loss once per micro-batch
        steps["n"] += 1
        return real_step(self, *args, **kwargs)

    def nan_on_the_second_step(*args, **kwargs):
        loss, stats = real_loss(*args, **kwargs)
        return (loss * float("nan"), stats) if steps["n"] >= 2 else (loss, stats)

    monkeypatch.setattr(lit_module.AgentRLModule, "training_step", counting_step)
    monkeypatch.setattr(lit_module, "policy_loss", nan_on_the_second_step)
    with pytest.raises(lit_module.NonFiniteTraining, match=r"^step 1: the loss or gradient is not finite \(loss=nan, "
                                                          r"grad_norm=nan, largest \|advantage\| [\d.e+-]+\)"):
        train_tiny(tmp_path, *RUN, "trainer.max_steps=3")
    last = read_checkpoint(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)  # finite, digest intact
    assert last["global_step"] == 1
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["last.ckpt", "step1.ckpt"]


def test_a_non_finite_gradient_is_one_line_on_the_command_line(tmp_path, monkeypatch, capsys, signal_credit):
    from agentcredit.lit import module as lit_module
    from tiny_runs import TINY

    real = lit_module.policy_loss

    def nan_gradient(logprobs, *args, **kwargs):
        loss, stats = real(logprobs, *args, **kwargs)
        return loss + 0.0 * logprobs.sum() * float("inf"), stats  # inf * 0 = NaN in the gradient path

    monkeypatch.setattr(lit_module, "policy_loss", nan_gradient)
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
        hydra_cli(*TINY, *RUN, f"hydra.run.dir={tmp_path / 'run'}")
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("training stopped: step 0: the loss or gradient is not finite"), lines
    assert not (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()  # nothing good to keep yet, nothing bad written


# ----- a checkpoint whose digest is valid but whose content does not fit (issue 30, item 4) -----

def wrong_shape(checkpoint):
    key = next(k for k in checkpoint["state_dict"] if k.startswith("policy.") and checkpoint["state_dict"][k].dim() == 2)
    checkpoint["state_dict"][key] = checkpoint["state_dict"][key][:, :-1].clone()


WRONG_CONTENT = {
    "a weight of another shape": (wrong_shape, r"policy\.\S+ has shape \(\d+, \d+\) in the checkpoint but \(\d+, \d+\)"),
    "no state_dict": (lambda c: c.pop("state_dict"), r"it holds no model weights \(no state_dict\)"),
    "weights only": (lambda c: c.pop("optimizer_states"), r"it holds weights only \(no optimizer_states\)"),
}


@pytest.mark.parametrize("case", WRONG_CONTENT)
def test_resuming_from_a_checkpoint_that_does_not_fit_is_one_line(run_dir, tmp_path, capsys, signal_credit, case):
    change, message = WRONG_CONTENT[case]
    checkpoint = load(run_dir / "checkpoints" / "last.ckpt")
    change(checkpoint)
    bad = resave(checkpoint, tmp_path / "bad.ckpt")
    assert read_checkpoint(bad, weights_only=False)  # its digest is valid: only its content is wrong
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
        hydra_cli(*RUN, *RESUME_CLI, f"ckpt_path={bad}", f"hydra.run.dir={tmp_path / 'run'}")
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"checkpoint error: {bad} cannot be loaded into this run: "), lines
    assert __import__("re").search(message, lines[0]), lines[0]


@pytest.mark.parametrize("state, problem", [
    ({"w": torch.zeros(2, 3)}, None),
    ({"w": torch.zeros(2, 4)}, "w has shape (2, 4) in the checkpoint but (2, 3) in the configured model; 1 tensor(s) differ"),
    ({}, "it holds no model weights (no state_dict)"),
    (None, "it holds no model weights (no state_dict)"),
    ({"w": [1, 2]}, "w is a list, not a tensor"),
    ({"v": torch.zeros(2)}, "it lacks 1 tensor(s) of the configured model, e.g. w"),
    ({"w": torch.zeros(2, 3), "v": torch.zeros(1)}, "it holds 1 tensor(s) the configured model has not, e.g. v"),
])
def test_state_dict_problem(state, problem):
    from agentcredit.common.checkpoint_file import state_dict_problem

    assert state_dict_problem({"w": torch.zeros(2, 3)}, state) == problem


def test_the_non_finite_line_names_the_largest_advantage_or_that_one_is_not_finite():
    import torch

    from agentcredit.lit.module import largest_advantage

    assert largest_advantage([torch.tensor([0.5, -2.0]), torch.tensor([1.25])]) == "largest |advantage| 2"
    assert largest_advantage([torch.tensor([1e308], dtype=torch.float64), torch.tensor([-3e300], dtype=torch.float64)]) == "largest |advantage| 1e+308"
    assert largest_advantage([torch.tensor([0.5]), torch.tensor([float("inf")])]) == "an advantage is not finite"
    assert largest_advantage([torch.tensor([])]) == "no advantages"
