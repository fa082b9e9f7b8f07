#!/bin/sh
# The planner's cost: `zero train --dry_run` of a 7B-class and a 70B-class GPT-2 at ZeRO-3 + bf16
# (bf16 gradient accumulation: model states 16 Psi/N) on 8 ranks, T = 2048, and `zero estimate`'s
# full search (27+ plans) for the 7B shape; wall time and peak RSS from /usr/bin/time -v. Targets
# (issue 15): 7B under 5 s and 500 MB, 70B under 10 s, on the 2-core development machine.
# Usage: benchmarks/planner_bench.sh [path/to/zero]   (default: build/tools/zero)
set -eu
zero=${1:-build/tools/zero}
[ -x "$zero" ] || { echo "planner_bench: no zero binary at $zero (build the zero target)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "planner_bench: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
config=$(mktemp /tmp/planner_bench_XXXXXX.json)
trap 'rm -f "$config"' EXIT
cat > "$config" <<'JSON'
{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
 "bf16": {"enabled": "auto"}, "data_types": {"grad_accum_dtype": "bf16"},
 "zero_optimization": {"stage": 3}}
JSON
measure() {
  name=$1
  shift
  /usr/bin/time -v "$@" > /tmp/planner_bench_out.$$ 2> /tmp/planner_bench_time.$$ || {
    cat /tmp/planner_bench_out.$$ /tmp/planner_bench_time.$$ >&2
    exit 1
  }
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' /tmp/planner_bench_time.$$)
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' /tmp/planner_bench_time.$$)
  states=$(grep -o '[0-9.]* x Psi/N' /tmp/planner_bench_out.$$ | head -1 || true)
  echo "RESULT $name wall=$wall max_rss_kb=$rss model_states=${states:-n/a}"
  rm -f /tmp/planner_bench_out.$$ /tmp/planner_bench_time.$$
}
for shape in 7b:n_embd=4096,n_layer=32,n_head=32,n_positions=2048 \
             70b:n_embd=8192,n_layer=80,n_head=64,n_positions=2048; do
  measure "dry_run_${shape%%:*}" "$zero" train --dry_run --bf16 --config_overrides "${shape#*:}" \
    --deepspeed "$config" --world_size 8 --block_size 2048
done
measure estimate_7b "$zero" estimate --config_overrides n_embd=4096,n_layer=32,n_head=32,n_positions=2048 \
  --block_size 2048 --per_device_train_batch_size 1 --bf16 --zero_stage 3 --num_gpus_per_node 8
