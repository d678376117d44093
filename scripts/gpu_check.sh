#!/usr/bin/env bash
# GPU check on a machine with one CUDA GPU; about 5-8 minutes. Prints one JSON line at the end.
#
#     bash scripts/gpu_check.sh                 # from the repository root, with the project installed
#     PY=/path/to/python bash scripts/gpu_check.sh
#
# What it runs (tiny model, bm25 retriever, no warm start, no W&B, bf16):
#   grpo_gpu / trace_gpu     3 training steps with trainer=gpu
#   grpo_fsdp / trace_fsdp   3 training steps with trainer=fsdp (FSDP2, bf16 compute) on one device
#   grpo_vllm                3 training steps with trainer=gpu rollout.engine=vllm (only where `vllm` imports)
#   reference_scoring        scripts/bench_reference_scoring.py on CUDA in bf16 (its JSON line)
#   rollout                  scripts/bench_rollout.py on CUDA, HF engine (its JSON line); with --engine vllm too
# Each step reports ok, its wall seconds and, on failure, the last line of its log (logs stay in $OUT).
# The GPU image holds torch, lightning, transformers and peft but not hydra-core, omegaconf or faiss:
# see the README's "GPU check" section for the wheels to carry.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export HYDRA_FULL_ERROR=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
COMMON=(model.warm_start=false env.retriever=bm25 logger=csv trainer.max_steps=3 trainer.val_check_interval=3
        trainer.limit_val_batches=1 trainer.enable_progress_bar=false data.prompts_per_step=2 data.n_val=2
        rollout.group_size=4 rollout.max_tool_turns=3 rollout.max_turn_tokens=48)

results=()
record() {  # name, status, seconds, log file
  local tail=""
  [ "$2" = 0 ] || tail=$(tail -n 1 "$4" | tr -d '"\\' | cut -c1-200)
  results+=("\"$1\": {\"ok\": $([ "$2" = 0 ] && echo true || echo false), \"s\": $3, \"error\": \"$tail\"}")
}

train() {  # name, overrides...
  local name=$1; shift
  local start=$SECONDS
  timeout 240 "$PY" train.py "${COMMON[@]}" "$@" "hydra.run.dir=$OUT/$name" >"$OUT/$name.log" 2>&1
  record "$name" $? $((SECONDS - start)) "$OUT/$name.log"
}

bench() {  # name, script, args...: keeps the script's JSON line
  local name=$1; shift
  local start=$SECONDS
  timeout 240 "$PY" "$@" >"$OUT/$name.log" 2>&1
  local status=$?
  record "$name" $status $((SECONDS - start)) "$OUT/$name.log"
  local line
  line=$(grep '^{' "$OUT/$name.log" | tail -n 1)
  [ "$status" = 0 ] && [ -n "$line" ] && results+=("\"${name}_line\": $line")
}

gpu=$("$PY" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" 2>/dev/null)
if [ -z "$gpu" ]; then
  echo '{"ok": false, "error": "no CUDA device visible to torch"}'
  exit 1
fi

train grpo_gpu credit=grpo trainer=gpu trainer.precision=bf16-mixed
train trace_gpu credit=trace trainer=gpu trainer.precision=bf16-mixed
# FSDP2 on one device: float32 master shards, bfloat16 compute, float32 gradient reduction.
FSDP=(trainer=fsdp trainer.accelerator=gpu trainer.devices=1 model.dtype=float32 trainer.strategy.param_dtype=bfloat16
      trainer.strategy.reduce_dtype=float32)
train grpo_fsdp credit=grpo "${FSDP[@]}"
train trace_fsdp credit=trace "${FSDP[@]}"
has_vllm=$("$PY" -c "import vllm" >/dev/null 2>&1 && echo 1 || echo 0)
if [ "$has_vllm" = 1 ]; then
  # The engine takes a fixed KV cache share of the GPU; the trainer keeps the rest.
  train grpo_vllm credit=grpo trainer=gpu rollout.engine=vllm rollout.vllm.kv_cache_gib=null \
    rollout.vllm.gpu_memory_utilization=0.3
fi
bench reference_scoring scripts/bench_reference_scoring.py --device cuda --dtype bfloat16 --T 8 --trajectories 8
bench rollout scripts/bench_rollout.py --device cuda --repeats 2 model.warm_start=false env.retriever=bm25
if [ "$has_vllm" = 1 ]; then
  bench rollout_vllm scripts/bench_rollout.py --device cuda --engine vllm --repeats 2 model.warm_start=false \
    env.retriever=bm25 rollout.vllm.kv_cache_gib=null rollout.vllm.gpu_memory_utilization=0.3
fi

ok=true
for r in "${results[@]}"; do
  case $r in *'"ok": false'*) ok=false ;; esac
done
joined=$(IFS=,; echo "${results[*]}")
echo "{\"ok\": $ok, \"gpu\": \"$gpu\", \"vllm\": $([ "$has_vllm" = 1 ] && echo true || echo false), \"logs\": \"$OUT\", $joined}"
[ "$ok" = true ]
