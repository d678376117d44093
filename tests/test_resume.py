"""Resume: a run stopped at step n and resumed from its checkpoint logs what the uninterrupted run logs from
step n+1 on; a run that dies mid-step loses only that step, and last.ckpt is never half written.

The runs use the `signal` credit method so that weights and Adam moments change every step (an untrained
tiny policy earns no reward, and GRPO would leave everything where it started)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil

import pytest
import torch

from agentcredit.lit.module import AgentRLModule
from tiny_runs import SIGNAL, read_metrics, train_tiny

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RUN = [*SIGNAL, "logger=csv", "trainer.max_steps=4", "trainer.val_check_interval=2", "checkpoint.every_n_steps=2"]


def logged(run_dir, from_step: int) -> list[dict]:
    """Metrics rows from `from_step` on, without wall-clock timings."""
    rows = [r for r in read_metrics(run_dir) if int(r["step"]) >= from_step]
    return [{k: v for k, v in r.items() if v != "" and not k.startswith("time/")} for r in rows]


def policy_weights(ckpt) -> dict[str, torch.Tensor]:
    state = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    return {k: v for k, v in state.items() if k.startswith("policy.")}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, signal_credit):
    out = tmp_path_factory.mktemp("uninterrupted")
    train_tiny(out, *RUN)
    return out


def test_resumed_run_logs_what_the_uninterrupted_run_logs(uninterrupted, tmp_path):
    train_tiny(tmp_path, *RUN, f"ckpt_path={uninterrupted / 'checkpoints' / 'step2.ckpt'}")
    expected, got = logged(uninterrupted, 2), logged(tmp_path, 0)
    # 2 train rows, 1 val row, 1 row of the held-out test after training
    assert [r["step"] for r in got] == [r["step"] for r in expected] == ["2", "3", "3", "4"]
    assert any(float(r.get("train/grad_norm", 0)) > 0 for r in expected)  # the weights did move
    for want, have in zip(expected, got):
        assert want.keys() == have.keys()
        for key in want:
            assert math.isclose(float(want[key]), float(have[key]), rel_tol=1e-5, abs_tol=1e-6), (want["step"], key)
    a, b = policy_weights(uninterrupted / "checkpoints" / "last.ckpt"), policy_weights(tmp_path / "checkpoints" / "last.ckpt")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_checkpoint_holds_policy_optimiser_step_stream_position_and_rng(uninterrupted):
    ckpt = torch.load(uninterrupted / "checkpoints" / "step2.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["global_step"] == 2
    assert any(k.startswith("policy.") for k in ckpt["state_dict"])
    assert ckpt["optimizer_states"][0]["state"], "no Adam moments in the checkpoint"
    assert ckpt["QuestionDataModule"]["train_stream"]["position"] == 4  # 2 steps x 2 prompts
    rng = next(v for k, v in ckpt["callbacks"].items() if k.startswith("RNGStates"))
    assert set(rng) >= {"python", "numpy", "torch"}


def test_a_run_dying_mid_step_loses_only_that_step(tmp_path, monkeypatch, signal_credit):
    step = AgentRLModule.training_step

    def dies_at_step_3(self, questions, batch_idx):
        if self.global_step == 2:
            raise RuntimeError("killed")
        return step(self, questions, batch_idx)

    monkeypatch.setattr(AgentRLModule, "training_step", dies_at_step_3)
    with pytest.raises(RuntimeError, match="killed"):
        train_tiny(tmp_path, *RUN, "checkpoint.every_n_steps=10")
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert last["global_step"] == 2  # steps 1 and 2 are kept; only the step that died is lost


def test_an_interrupted_checkpoint_write_leaves_the_previous_last_ckpt_intact(uninterrupted, tmp_path, monkeypatch):
    from fsspec.implementations.local import LocalFileOpener
    from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

    last = tmp_path / "last.ckpt"
    last.write_bytes((uninterrupted / "checkpoints" / "step2.ckpt").read_bytes())
    newer = torch.load(uninterrupted / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    write = LocalFileOpener.write

    def dies_half_way(self, data):
        write(self, bytes(data)[: len(data) // 2])
        raise KeyboardInterrupt  # what a kill during the write looks like to the writer

    monkeypatch.setattr(LocalFileOpener, "write", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        TorchCheckpointIO().save_checkpoint(newer, last)
    monkeypatch.undo()
    assert torch.load(last, map_location="cpu", weights_only=False)["global_step"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def samples(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "credit_samples.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("hook, at_step, rows_written, last_step", [
    ("training_step", 3, ["0", "1", "1", "2"], 3),  # in a training step: every earlier row reached the file
    # in the validation after step 2: last.ckpt is written after a validation, so the resumed run repeats step 2
    # and the validation (Lightning does not repeat a validation begun after the checkpoint it restores)
    ("validation_step", 2, ["0", "1"], 1),
])
def test_resume_true_continues_the_run_folder_as_if_never_stopped(uninterrupted, tmp_path, monkeypatch, hook, at_step,
                                                                   rows_written, last_step):
    real = getattr(AgentRLModule, hook)

    def dies(self, questions, batch_idx):
        if self.global_step == at_step:
            raise RuntimeError("killed")
        return real(self, questions, batch_idx)

    monkeypatch.setattr(AgentRLModule, hook, dies)
    with pytest.raises(RuntimeError, match="killed"):
        train_tiny(tmp_path, *RUN)
    monkeypatch.undo()
    assert [r["step"] for r in logged(tmp_path, 0)] == rows_written
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == last_step
    train_tiny(tmp_path, *RUN, "resume=true")
    assert _close(logged(uninterrupted, 0), logged(tmp_path, 0))
    assert samples(tmp_path) == samples(uninterrupted)
    starts = json.loads((tmp_path / "environment.json").read_text())  # one entry per start, the resumed one kept
    assert [s["resuming"] for s in starts] == [False, True] and starts[1]["packages"]["torch"] == torch.__version__
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["last.ckpt", "step2.ckpt", "step4.ckpt"]
    a, b = policy_weights(uninterrupted / "checkpoints" / "last.ckpt"), policy_weights(tmp_path / "checkpoints" / "last.ckpt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_an_explicit_checkpoint_into_its_own_folder_rewrites_only_the_later_steps(uninterrupted, tmp_path):
    """`hydra.run.dir=<run> ckpt_path=<run>/checkpoints/step2.ckpt`: rows before step 2 are kept, later ones redone."""
    shutil.copytree(uninterrupted, tmp_path, dirs_exist_ok=True)
    train_tiny(tmp_path, *RUN, f"ckpt_path={tmp_path / 'checkpoints' / 'step2.ckpt'}")
    assert _close(logged(uninterrupted, 0), logged(tmp_path, 0))
    assert samples(tmp_path) == samples(uninterrupted)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["last.ckpt", "step2.ckpt", "step4.ckpt"]
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 4


def _close(expected: list[dict], got: list[dict]) -> bool:
    assert [r["step"] for r in got] == [r["step"] for r in expected]
    for want, have in zip(expected, got):
        assert want.keys() == have.keys(), want["step"]
        for key in want:
            assert math.isclose(float(want[key]), float(have[key]), rel_tol=1e-5, abs_tol=1e-6), (want["step"], key)
    return True


def test_resume_true_from_a_damaged_last_ckpt_is_one_line_and_keeps_the_logs(uninterrupted, tmp_path, capsys):
    from tiny_runs import TINY, hydra_cli

    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    (run / "test_summary.json").unlink()  # an unfinished run
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    before = (run / "metrics.csv").read_bytes()
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
        hydra_cli(*TINY, *RUN, "resume=true", f"hydra.run.dir={run}")
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"checkpoint error: {last} is not a whole checkpoint (truncated"), lines
    assert (run / "metrics.csv").read_bytes() == before


def test_a_finished_run_trained_further_in_its_own_folder_tests_again_at_its_new_end(uninterrupted, tmp_path):
    shutil.copytree(uninterrupted, tmp_path, dirs_exist_ok=True)
    train_tiny(tmp_path, *RUN, "trainer.max_steps=5", f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}")
    # train 0-3 and the validations kept; the old test row (step 4) dropped; train 4, then the test at step 5
    assert [r["step"] for r in logged(tmp_path, 0)] == ["0", "1", "1", "2", "3", "3", "4", "5"]
    assert _close(logged(uninterrupted, 0)[:-1], logged(tmp_path, 0)[:-2])
    assert json.loads((tmp_path / "test_summary.json").read_text())["steps"] == 5


def test_resume_true_under_other_settings_is_one_line_and_keeps_the_run(uninterrupted, tmp_path, capsys):
    """A resumed command that leaves out (or changes) a setting of what the run computes would continue its weights
    under another method in its own folder: refused before any model loads, the folder as it was."""
    from tiny_runs import TINY, hydra_cli

    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    (run / "test_summary.json").unlink()  # an unfinished run
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    changed = [o for o in RUN if o != "train.lr=0.01"] + ["train.lr=0.02", "threads=1"]  # threads may differ
    with pytest.raises(SystemExit) as exit_info, contextlib.redirect_stdout(io.StringIO()):
        hydra_cli(*TINY, *changed, "resume=true", f"hydra.run.dir={run}")
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"config error: resume=true would continue the run in {run} under other settings: train.lr=0.02 "
                     f"where the run has 0.01; repeat the run's own overrides (its .hydra/overrides.yaml), or start a "
                     f"new folder from its checkpoint (hydra.run.dir=<new folder> "
                     f"ckpt_path={run / 'checkpoints' / 'last.ckpt'})"]
    after = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "train.log"}
    assert after == {k: v for k, v in before.items() if k.name != "train.log"}
