"""The README's check and benchmark commands (benchmarks through `agentcredit bench`) run and print one JSON line with the promised keys."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_runs import AGENTCREDIT

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = ["model.warm_start=false", "model.hidden_size=64", "model.num_heads=2", "model.num_kv_heads=2",
              "model.intermediate_size=128", "model.vocab_size=800", "env.retriever=bm25",
              "rollout.max_tool_turns=2", "rollout.max_turn_tokens=12"]


def run_json(*args: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, done.stdout[-2000:]
    return json.loads(lines[0])


def test_world_check_prints_its_line():
    out = run_json("-m", "agentcredit.world.check", "--n", "10", "--split", "val", "--retriever", "bm25")
    assert {"n", "oracle_success", "per_template", "single_doc_success", "mean_tool_calls", "max_tool_calls"} <= out.keys()
    assert out["n"] == 10 and out["oracle_success"] >= 0.9


def test_evaluate_prints_every_figure_of_the_base_policy(tmp_path):
    out = run_json("scripts/evaluate.py", "split=val", "n=4", "oracle_queries=true", *TINY_MODEL,
                   f"hydra.run.dir={tmp_path}")
    assert {"model", "ckpt_path", "split", "n", "success", "format_valid", "well_formed_turns", "answer_kind_match",
            "mean_tool_calls", "max_tool_calls", "per_template", "finish_reasons", "diagnostics", "temperature",
            "eval_seed", "seconds", "trajectories", "answer_prior", "oracle_queries", "hop_funnel"} <= out.keys()
    assert out["model"] == "tiny" and out["ckpt_path"] is None and out["split"] == "val" and out["n"] == 4
    assert 0 <= out["success"] <= 1 and 0 <= out["format_valid"] <= 1
    assert 0 <= out["answer_prior"]["mode_success"] <= 1  # success without reading, on the same questions
    assert 0 <= out["well_formed_turns"] <= 1 and 0 <= out["answer_kind_match"] <= 1
    assert {"first_query", "later_queries", "later_query_count"} <= out["oracle_queries"].keys()
    funnel = out["hop_funnel"]  # every testbed question is a chain of hops, and each rollout fails once at most
    assert funnel["chains"] == 4 and sum(funnel["first_failure"].values()) == 4
    # every rollout reaches its chain's first search
    assert sum(reached for stage, (_, reached) in funnel["stages"].items() if stage.endswith("searched")
               and stage.startswith("1/")) == 4
    assert len((tmp_path / "trajectories.jsonl").read_text().splitlines()) == 4


def test_bench_rollout_prints_both_rates_from_one_run():
    out = run_json(str(AGENTCREDIT), "bench", "rollout", "--questions", "1", "--group", "2", "--threads", "1", "--repeats", "2",
                   "--", *TINY_MODEL)
    assert {"model", "rollouts", "generated_tokens", "tokens_per_s", "plain_generate_tokens_per_s", "ratio"} <= out.keys()
    assert out["rollouts"] == 2 and out["repeats"] == 2
    # Of two repeats, the figures are the lower ratio's.
    assert len(out["ratios"]) == 2 and abs(out["ratio"] - min(out["ratios"])) < 1e-9
    assert abs(out["ratio"] - out["tokens_per_s"] / out["plain_generate_tokens_per_s"]) < 0.01
    # Per-row lengths: the plain batch runs as long as the longest rollout, never shorter than the mean.
    assert out["longest_trajectory_tokens"] >= out["mean_trajectory_tokens"] >= 1
    assert out["generated_tokens"] <= out["rollouts"] * out["longest_trajectory_tokens"]
    assert "ratio_mean_length" in out
    # The time split covers the rollout: its parts add up to the rollout's wall time.
    parts = out["forward_s"] + out["tools_s"] + out["other_s"]
    assert abs(parts - out["rollout_s"]) < 0.05 and out["forward_s"] > 0 and out["tools_s"] >= 0
    # One forward per step at least: a step per sampled token of the longest trajectory.
    assert out["forwards"] >= out["longest_trajectory_tokens"] and out["prefill_tokens"] > 0


STEP_PARTS = ("rollout_s", "credit_s", "update_s", "other_s")
PRINTED_HALF_UNIT = 5e-5  # bench_step prints every float rounded to 4 decimals


def rounding_of_quotient(*parts: tuple[float, int]) -> float:
    """How far a printed quotient may sit from the one recomputed from its printed parts, each part given as
    (value, rounded figures summed into it): a part is off by half a unit per figure, relative errors add up
    under products and quotients, and the printed quotient itself is off by half a unit."""
    quotient = 1.0
    for i, (value, _) in enumerate(parts):
        quotient = quotient * value if i == 0 else quotient / value
    relative = sum(n * PRINTED_HALF_UNIT / abs(value) for value, n in parts)
    return 1.01 * (abs(quotient) * relative + PRINTED_HALF_UNIT)


def test_bench_step_splits_a_step_and_counts_padding():
    # The KL term keeps every rollout in the update: an untrained policy's GRPO advantages are all 0,
    # and such rollouts are left out (update_skipped_share).
    out = run_json("scripts/bench_step.py", "--steps", "2", "--warmup", "1", "--threads", "1", "--",
                   *TINY_MODEL, "rollout.group_size=2", "train.micro_batch_size=2", "logger=none", "credit.kl_coef=0.01")
    assert len(out["steps"]) == 2 and out["threads"] == 1 and out["startup_s"] > 0
    # Medians of parts need not add up exactly to the median step; each step's parts do (one step here per median).
    assert out["rollout_forward_s"] > 0 and out["update_forward_s"] > 0 and out["update_backward_s"] > 0
    assert abs(out["rollout_forward_s"] + out["rollout_tools_s"] + out["rollout_python_s"] - out["rollout_s"]) < 1e-3
    assert abs(out["update_forward_s"] + out["update_backward_s"] + out["update_optimiser_s"] - out["update_s"]) < 1e-3
    assert out["padding_share"] == 0.0  # padding-free micro-batches (train.padding_free=auto, on one thread)
    assert out["sampled_tokens"] > 0 and out["update_tokens"] >= out["sampled_tokens"] and out["update_skipped_share"] == 0.0
    assert out["step_cpu_s"] > 0  # the process's CPU time in the step, beside its wall time
    # The distance to the machine's limit: each part's GFLOPs over its seconds, beside a plain matmul's rate.
    for part in ("rollout_forward", "update_forward", "update_backward"):
        assert out[f"{part}_gflops"] > 0 and out[f"{part}_gflop_s"] > 0
        assert out[f"{part}_gflop_s"] == pytest.approx(out[f"{part}_gflops"] / out[f"{part}_s"], abs=rounding_of_quotient(
            (out[f"{part}_gflops"], 1), (out[f"{part}_s"], 1)))
    # The sampler ran on prompts and observations besides the sampled tokens; with the KL term and no TIS the
    # update ran each batch once, with a graph: its backward is twice its forward.
    assert out["rollout_forward_tokens"] > out["sampled_tokens"]
    assert out["update_backward_gflops"] == pytest.approx(2 * out["update_forward_gflops"], abs=2e-4)
    assert out["matmul_gflop_s"] > 0 and out["matmul_model_shape_gflop_s"] > 0 and out["matmul_model_shape_tokens"] >= 1
    update_gflops = out["update_forward_gflops"] + out["update_backward_gflops"]
    update_s = out["update_forward_s"] + out["update_backward_s"]
    assert out["update_share_of_matmul_rate"] == pytest.approx(
        update_gflops / update_s / out["matmul_gflop_s"],
        abs=rounding_of_quotient((update_gflops, 2), (update_s, 2), (out["matmul_gflop_s"], 1)))
    # The step's floor at the machine's rates (models/step_floor.py) and its ratio to the step.
    assert out["rollout_forward_kv_keys"] > 0 and out["read_gb_s"] == max(out["sum_gb_s"], out["gemv_gb_s"])
    assert out["step_floor_s"] > 0  # not checked against step_s: a tiny run reads its cache from L2, above the DRAM rate
    assert out["step_floor_ratio"] == pytest.approx(out["step_s"] / out["step_floor_s"], abs=rounding_of_quotient(
        (out["step_s"], 1), (out["step_floor_s"], 1)))


def test_bench_step_split_of_hand_made_timers():
    import importlib.util
    from collections import Counter

    spec = importlib.util.spec_from_file_location("bench_step", ROOT / "benchmarks" / "bench_step.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    parts = Counter(step_s=10.0, rollout_s=6.0, rollout_forward_s=4.0, rollout_tools_s=0.5, update_s=3.0,
                    update_forward_s=1.0, update_backward_s=1.5, log_s=0.2, remember_s=0.1, sampled_tokens=500,
                    update_padded_tokens=2000, update_real_tokens=1500)
    out = bench.split(parts)
    assert out["rollout_python_s"] == 1.5 and out["update_optimiser_s"] == 0.5
    assert abs(out["credit_s"] - 0.7) < 1e-12 and abs(out["other_s"] - 0.3) < 1e-12  # 10 - 6 - 3 - 0.3
    assert out["padding_share"] == 0.25 and out["tokens_per_s"] == 50.0
    assert out["update_forward_share"] == 1.0  # a revision that logs no share ran every token
    assert bench.split(parts + Counter(update_forward_share=0.4))["update_forward_share"] == 0.4


def load_benchmark(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_bench_test_stage_times_both_sides_with_the_same_outcomes():
    # A variable no code reads on the before side: both sides sample the same, in a fresh process each.
    out = run_json(str(AGENTCREDIT), "bench", "test-stage", "--n", "3", "--env-before", "AGENTCREDIT_BENCH_UNREAD=1",
                   "--", *TINY_MODEL, "logger=none")
    assert out["before"]["env"] == {"AGENTCREDIT_BENCH_UNREAD": "1"} and out["after"]["env"] == {}
    for side in ("before", "after"):
        assert out[side]["questions"] == 3 and out[side]["test_s"] > 0 and out[side]["test_cpu_s"] > 0
        assert out[side]["sampled_tokens"] > 0 and 0 <= out[side]["accuracy"] <= 1
    assert out["same_outcomes"] is True and out["same_rollouts"] is True and "questions_differing" not in out
    assert out["before"]["outcomes_sha256"] == out["after"]["outcomes_sha256"]
    assert out["before"]["rollouts_sha256"] == out["after"]["rollouts_sha256"] and out["after"]["rollouts"] == 3
    assert out["ratio"] > 0 and len(out["ratios"]) == 1 and isinstance(out["before"]["questions"], int)
    assert out["ratio"] == pytest.approx(out["before"]["test_s"] / out["after"]["test_s"], rel=0.01)


def test_bench_test_stage_hashes_results_not_times():
    bench = load_benchmark("bench_test_stage")
    a = {"id": "q1", "success": 1.0, "samples": 2, "tokens": 10.5, "tool_calls": 3.0}
    b = {"id": "q2", "success": 0.0, "samples": 2, "tokens": 4.0, "tool_calls": 1.0}
    base = bench.outcome_figures([a, b])
    assert base["questions"] == 2 and base["accuracy"] == 0.5
    assert base["sampled_tokens"] == 29  # 10.5 * 2 + 4 * 2: tokens is a mean over a question's samples
    # The same results in another key and line order, or with a time beside them, hash the same
    reordered = bench.outcome_figures([b, dict(reversed(a.items()), rollout_s=9.0)])
    assert reordered["outcomes_sha256"] == base["outcomes_sha256"]
    changed = bench.outcome_figures([a, {**b, "tool_calls": 2.0}])
    assert changed["outcomes_sha256"] != base["outcomes_sha256"]
    missing = bench.outcome_figures([a])
    assert bench.questions_differing([base, reordered]) == 0
    assert bench.questions_differing([base, changed, base]) == 1
    assert bench.questions_differing([base, missing]) == 1  # q2 absent from one run
    # A side's medians: seconds of two repeats average, counts stay whole numbers
    runs = [{"test_s": 2.0, "questions": 2, "outcomes_sha256": "x", "rollouts_sha256": "r"},
            {"test_s": 3.0, "questions": 2, "outcomes_sha256": "x", "rollouts_sha256": "r"}]
    side = bench.side_figures(runs)
    assert side["test_s"] == 2.5 and side["questions"] == 2 and isinstance(side["questions"], int)
    assert side["test_s_per_repeat"] == [2.0, 3.0] and side["outcomes_sha256"] == ["x"] and side["rollouts_sha256"] == ["r"]
    # A revision without per-question outcomes: no outcome hash to list
    assert bench.side_figures([{**runs[0], "outcomes_sha256": None}])["outcomes_sha256"] == []


def test_bench_test_stage_rollout_lines_tell_rollouts_apart():
    from types import SimpleNamespace

    bench = load_benchmark("bench_test_stage")
    rollout = SimpleNamespace(question_id="q1", input_ids=[5, 6, 7], loss_mask=[0, 1, 1], reward=1.0, finish_reason="answer")
    line = json.loads(bench.rollout_line(rollout))
    assert line["id"] == "q1" and line["sampled"] == 2 and line["reward"] == 1.0 and line["finish"] == "answer"
    assert bench.rollout_line(SimpleNamespace(**{**vars(rollout), "input_ids": [5, 6, 8]})) != bench.rollout_line(rollout)
    assert bench.rollout_line(SimpleNamespace(**{**vars(rollout), "input_ids": [56, 7]})) != bench.rollout_line(rollout)


def test_bench_reference_scoring_prints_its_line():
    out = run_json(str(AGENTCREDIT), "bench", "reference-scoring", "--T", "3", "--repeats", "1", "--threads", "1",
                   "--prompt-len", "20", "--action-len", "5", "--obs-len", "10")
    assert {"T", "max_abs_diff", "naive_s", "fast_s", "speedup"} <= out.keys()
    assert out["T"] == 3 and out["max_abs_diff"] <= 1e-4


@pytest.mark.slow  # the inductor compiles the sampler's two layer parts and the update's forward and backward (~1 min)
def test_bench_compile_times_both_sides_on_the_same_work():
    out = run_json(str(AGENTCREDIT), "bench", "compile", "--questions", "1", "--group", "2", "--repeats", "2",
                   "--", *TINY_MODEL)
    assert out["rollouts"] == 2 and out["repeats"] == 2 and len(out["sampler_forward_ratios"]) == 2
    # Figures are medians of the repeats: with two, the ratio of the two medians lies between the repeats' ratios.
    for part in ("sampler_forward", "update"):
        low, high = sorted(out[f"{part}_ratios"])
        assert low - 2 * PRINTED_HALF_UNIT <= out[f"{part}_ratio"] <= high + 2 * PRINTED_HALF_UNIT
    assert out["update_ratio"] == pytest.approx(out["update_eager_s"] / out["update_compiled_s"], abs=rounding_of_quotient(
        (out["update_eager_s"], 1), (out["update_compiled_s"], 1)))
    # Compiled and eager are the same arithmetic up to the order of float sums.
    assert out["same_tokens"] and out["sampler_max_logprob_gap"] < 1e-4
    assert out["update_max_logprob_gap"] < 1e-4 and out["update_grad_gap"] < 1e-4
    assert out["update_tokens"] > out["sampler_tokens"] > 0


def test_build_base_policy_writes_weights_tokenizer_and_info(tmp_path):
    small = [o for o in TINY_MODEL if o != "model.warm_start=false"]
    short = ["warmstart.episodes=4", "warmstart.steps=2", "warmstart.window_steps=1", "warmstart.window_mix=1",
             "warmstart.batch_size=2", "warmstart.window_batch_size=2", "warmstart.aux_worlds=0",
             "data.world.num_documents=80", "data.world.num_questions=60"]
    out = run_json("scripts/build_base_policy.py", "--quiet", "--out", str(tmp_path / "bp"), "--n-eval", "4", *small, *short)
    assert out["steps"] == 2 and out["examples"] == 4 and len(out["key"]) == 16
    assert {"success", "answer_prior", "oracle_queries", "readiness", "well_formed_turns"} <= out["evaluation"].keys()
    info = json.loads((tmp_path / "bp" / "info.json").read_text())
    assert info["key"] == out["key"] and info["build_seconds"] > 0
    assert (tmp_path / "bp" / "policy.pt").is_file() and (tmp_path / "bp" / "tokenizer.json").is_file()


def test_build_base_policy_refuses_float64_in_one_line_before_building(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "scripts/build_base_policy.py", "--quiet", "--out", str(tmp_path / "bp"),
                           "model.dtype=float64"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "config error: the base policy is built in float32 and float64 runs upcast it: build it once with "
        "`python scripts/build_base_policy.py <the same overrides> model.dtype=float32`"]
    assert not (tmp_path / "bp").exists()


def test_readiness_prints_both_means_with_counts_and_errors():
    out = run_json("scripts/research/readiness.py", "--n", "4", "--", *TINY_MODEL)
    assert out["n"] == 4 and out["eps"] == 0.1
    assert {"revealing_mean", "revealing_se", "revealing_n", "other_mean", "other_se", "other_n", "gap", "gap_in_se"} <= out.keys()
