"""DDP on 2 CPU processes (gloo): a few steps complete, ranks train on different questions, and
gradients are averaged, so both ranks end with the same weights (which did move)."""

from __future__ import annotations

import json

import pytest

from tiny_runs import SIGNAL, TINY, cli, read_metrics

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_ddp_on_two_cpu_processes(tmp_path):
    # micro_batch_size=2 < 4 trajectories per rank: two backward passes per step go through DDP's gradient sync.
    result = cli("tests/ddp_job.py", str(tmp_path), *SIGNAL, "train.micro_batch_size=2", "logger=csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert len(ranks[0]["questions"]) == len(ranks[1]["questions"]) == 4  # 2 steps x 2 prompts
    assert not set(ranks[0]["questions"]) & set(ranks[1]["questions"])
    assert ranks[0]["before"] == ranks[1]["before"]
    assert ranks[0]["after"] != ranks[0]["before"]
    assert ranks[0]["after"] == pytest.approx(ranks[1]["after"], rel=1e-6)
    steps = [row for row in read_metrics(tmp_path) if row["train/loss"]]
    assert [int(r["step"]) for r in steps] == [0, 1]
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()
    # The validation's per-question file holds both ranks' questions, gathered and written once by rank 0
    from agentcredit.records.outcomes import read_outcomes

    validated = read_outcomes(tmp_path / "val_outcomes" / "step000002.jsonl")
    assert len(validated) == 2 and [o.id for o in validated] == sorted(o.id for o in validated)


@pytest.mark.parametrize("trainer", ["ddp", "fsdp"])
def test_the_readme_s_two_process_commands_run_from_the_command_line_into_a_dated_folder(tmp_path, trainer):
    # `python train.py trainer=ddp` as typed: Lightning starts rank 1 by re-running the command with rank 0's run
    # folder, which rank 0 holds; the command's folder check let rank 1 in only once it knew it was a worker.
    tiny = [o for o in TINY if not o.startswith("logger")]
    result = cli("train.py", *tiny, "logger=csv", f"trainer={trainer}", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "is in use by another run" not in result.stdout + result.stderr
    (run,) = (tmp_path / "outputs" / "runs").iterdir()
    assert (run / "test_summary.json").is_file() and (run / "train_ddp_process_1.log").is_file()
    assert "[agentcredit] final val/accuracy=" in result.stdout


def test_val_and_test_means_pool_every_process_s_questions():
    from agentcredit.lit.module import pooled_outcomes

    # process 0: 3 questions, 2 right, all well-formed, 12 tool calls, 1 invalid; process 1: 1 question, wrong,
    # malformed, 2 tool calls. Over the 4 questions: accuracy 2/4 (a mean of the two means would say 1/3).
    n, means = pooled_outcomes([[3, 2, 3, 12, 1], [1, 0, 0, 2, 0]])
    assert n == 4
    assert means == {"accuracy": 0.5, "format_valid": 0.75, "tool_calls": 3.5, "invalid_tool_calls": 0.25}
