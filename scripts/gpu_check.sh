#!/usr/bin/env bash
# GPU check on a machine with one CUDA GPU; about 6-10 minutes. Prints one JSON line per check as it
# ends, then a summary line.
#
#     bash scripts/gpu_check.sh                 # from the repository root, with the project installed
#     PY=/path/to/python bash scripts/gpu_check.sh
#     bash scripts/gpu_check.sh --list          # each check's command line, one a line; runs nothing (no GPU needed)
#
# What it runs (tiny model, bm25 retriever, no warm start, no W&B, bf16):
#   grpo_gpu / trace_gpu     3 training steps with trainer=gpu
#   grpo_fsdp / trace_fsdp   3 training steps with trainer=fsdp (FSDP2, bf16 compute) on one device
#   grpo_vllm                3 training steps with trainer=gpu rollout.engine=vllm (only where `vllm` imports)
#   grpo_fsdp_vllm           3 training steps with trainer=fsdp rollout.engine=vllm (only where `vllm` imports):
#                            SmolLM2-135M's architecture (Llama, 30 layers x 576, 9 heads, 3 KV heads) with random
#                            weights, float32 shards, bf16 compute, a bf16 engine reloaded from the gathered shards
#   reference_scoring        benchmarks/bench_reference_scoring.py on CUDA in bf16 (its JSON line as result)
#   rollout                  benchmarks/bench_rollout.py on CUDA, HF engine (its JSON line); with --engine vllm too
# Each line says ok, its wall seconds, on failure the last line of its log (logs stay in $OUT), and for
# a training run what its metrics.csv says: step time, weight sync seconds and the largest logprob gap
# (scripts/check_line.py).
# The GPU image holds torch, lightning, transformers and peft but not hydra-core, omegaconf or faiss:
# see docs/gpu-check.md for the wheels to carry.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
LIST=0
[ "${1:-}" = "--list" ] && LIST=1
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export HYDRA_FULL_ERROR=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
# Random weights earn no reward, so every advantage is 0 and the update would skip every rollout: no step
# time of an update and no logprob gap. train.skip_zero_advantage=false runs them all.
COMMON=(model.warm_start=false env.retriever=bm25 logger=csv trainer.max_steps=3 trainer.val_check_interval=3
        trainer.limit_val_batches=1 trainer.enable_progress_bar=false data.prompts_per_step=2 data.n_val=2
        rollout.group_size=4 rollout.max_tool_turns=3 rollout.max_turn_tokens=48 train.skip_zero_advantage=false)

lines=()
report() {  # name, status, seconds, log, [check_line options]: print the check's JSON line and keep it
  local line
  line=$("$PY" scripts/check_line.py "$@" 2>/dev/null) ||
    line="{\"check\": \"$1\", \"ok\": false, \"s\": $3, \"error\": \"scripts/check_line.py failed\"}"
  echo "$line"
  lines+=("$line")
}

train() {  # name, overrides...
  local name=$1; shift
  if [ "$LIST" = 1 ]; then echo "$name: $PY train.py ${COMMON[*]} $*"; return; fi
  local start=$SECONDS
  timeout 300 "$PY" train.py "${COMMON[@]}" "$@" "hydra.run.dir=$OUT/$name" >"$OUT/$name.log" 2>&1
  report "$name" $? $((SECONDS - start)) "$OUT/$name.log" --run "$OUT/$name"
}

bench() {  # name, script, args...: the script's own JSON line becomes the check's result
  local name=$1; shift
  if [ "$LIST" = 1 ]; then echo "$name: $PY $*"; return; fi
  local start=$SECONDS
  timeout 240 "$PY" "$@" >"$OUT/$name.log" 2>&1
  report "$name" $? $((SECONDS - start)) "$OUT/$name.log" --bench
}

if [ "$LIST" = 1 ]; then
  gpu="(listing)"; has_vllm=1
else
  gpu=$("$PY" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" 2>/dev/null)
  if [ -z "$gpu" ]; then
    echo '{"check": "cuda", "ok": false, "error": "no CUDA device visible to torch"}'
    exit 1
  fi
  has_vllm=$("$PY" -c "import vllm" >/dev/null 2>&1 && echo 1 || echo 0)
fi

train grpo_gpu credit=grpo trainer=gpu trainer.precision=bf16-mixed
train trace_gpu credit=trace trainer=gpu trainer.precision=bf16-mixed
# FSDP2 on one device: float32 master shards, bfloat16 compute, float32 gradient reduction.
FSDP=(trainer=fsdp trainer.accelerator=gpu trainer.devices=1 model.dtype=float32 trainer.strategy.param_dtype=bfloat16
      trainer.strategy.reduce_dtype=float32)
train grpo_fsdp credit=grpo "${FSDP[@]}"
train trace_fsdp credit=trace "${FSDP[@]}"
# SmolLM2-135M's shape (its head size 64 = 576 / 9), random weights: a real architecture without its weights.
SMOLLM2_SHAPE=(model.architecture=llama model.hidden_size=576 model.num_layers=30 model.num_heads=9 model.num_kv_heads=3
               model.intermediate_size=1536 model.rope_theta=100000)
# The engine takes a fixed share of the GPU for its KV cache; the trainer keeps the rest.
VLLM_GPU=(rollout.engine=vllm rollout.vllm.kv_cache_gib=null rollout.vllm.gpu_memory_utilization=0.3)
if [ "$has_vllm" = 1 ]; then
  train grpo_vllm credit=grpo trainer=gpu "${VLLM_GPU[@]}"
  train grpo_fsdp_vllm credit=grpo "${FSDP[@]}" "${SMOLLM2_SHAPE[@]}" "${VLLM_GPU[@]}" rollout.vllm.dtype=bfloat16
fi
bench reference_scoring benchmarks/bench_reference_scoring.py --device cuda --dtype bfloat16 --T 8 --trajectories 8
bench rollout benchmarks/bench_rollout.py --device cuda --repeats 2 model.warm_start=false env.retriever=bm25
if [ "$has_vllm" = 1 ]; then
  bench rollout_vllm benchmarks/bench_rollout.py --device cuda --engine vllm --repeats 2 model.warm_start=false \
    env.retriever=bm25 "${VLLM_GPU[@]:1}"
fi
[ "$LIST" = 1 ] && exit 0

ok=true
failed=()
for line in "${lines[@]}"; do
  case $line in *'"ok": false'*) ok=false; failed+=("\"$(echo "$line" | sed 's/^{"check": "\([^"]*\)".*/\1/')\"") ;; esac
done
echo "{\"check\": \"summary\", \"ok\": $ok, \"gpu\": \"$gpu\", \"vllm\": $([ "$has_vllm" = 1 ] && echo true || echo false), \"checks\": ${#lines[@]}, \"failed\": [$(IFS=,; echo "${failed[*]}")], \"logs\": \"$OUT\"}"
[ "$ok" = true ]
