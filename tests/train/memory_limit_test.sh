#!/usr/bin/env bash
# The whole-run memory plan under a real memory limit (issue 24's acceptance), one rank, a GPT-2
# of 24 layers x 320 (29.7M parameters, fp32 + AdamW model states 16 x 29.7M = 476 MB), ZeRO-3
# with optimizer and parameters on NVMe (a folder of the work dir):
#   A  without a limit: 2 steps, checkpoint-1 and checkpoint-2, the final model.
#   B  in a memory cgroup whose limit is half the model states: trains with a checkpoint after
#      each step (gradients swapped to NVMe, shard files streamed from it one sub-group at a
#      time), and its model equals A's bit for bit; `zero checkpoint consolidate` of checkpoint-2
#      under the same limit gives A's model.
#   C  resuming checkpoint-1 under that limit resumes to step 2 and equals A's model (the load
#      reads the shard files into one NVMe sub-group's host slot at a time:
#      Engine::fill_shard_states).
#   Q  the same resume under 90% of its planned load phase is refused before anything is
#      allocated, naming the load phase.
#   R  a limit of 60% of B's planned largest phase: refused, naming that phase, nothing written.
#   S  sub-groups smaller than a unit (issue 39): a GPT-2 of one 1024-wide layer, whose block of
#      12.6M elements is far larger than the 1e6 sub_group_size, under a 300 MiB limit. With
#      whole-unit sub-groups it was refused (load needs 366.7 MiB, train 418 MiB: a block's slot
#      and windows, 16 bytes an element); split into sub-groups it trains (planned 246.5 MiB,
#      measured 249.3 MiB), its phases within their plan.
# Every limited run's phases (load, train, checkpoint, final save) peak, measured by VmHWM, at
# most 5% above their plan (baseline included). Skips (77) when no memory cgroup can be made.
#   memory_limit_test.sh ZERO WORK_DIR
set -euo pipefail
zero=$1 work=$2
corpus_script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/lcg_corpus.py
rm -rf "$work" && mkdir -p "$work/nvme" && cd "$work"
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# A child of this process's memory cgroup (v1 memory.limit_in_bytes, or v2 memory.max).
[ "$(id -u)" = 0 ] || skip "not root: no memory cgroup can be made"
if v1=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup | cut -d: -f3-) &&
  [ -w "/sys/fs/cgroup/memory$v1" ]; then
  parent=/sys/fs/cgroup/memory$v1 limit_file=memory.limit_in_bytes
elif v2=$(grep '^0::' /proc/self/cgroup | cut -d: -f3-) &&
  grep -qw memory "/sys/fs/cgroup$v2/cgroup.subtree_control" 2>/dev/null; then
  parent=/sys/fs/cgroup$v2 limit_file=memory.max
else
  skip "no writable memory cgroup (v1 memory controller or v2 memory in subtree_control)"
fi
group=$parent/zero_memory_limit_$$
mkdir "$group" 2>/dev/null || skip "cannot make $group"
trap 'rmdir "$group" 2>/dev/null || true' EXIT
[ -f "$group/$limit_file" ] || skip "$group has no $limit_file"

python3 "$corpus_script" 400 corpus.txt
cat >z3nvme.json <<EOF
{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
 "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
 "zero_optimization": {"stage": 3, "sub_group_size": 1000000,
   "stage3_max_live_parameters": 2000000, "stage3_prefetch_bucket_size": 1000000,
   "reduce_bucket_size": 1000000, "stage3_param_persistence_threshold": 0,
   "offload_optimizer": {"device": "nvme", "nvme_path": "$work/nvme"},
   "offload_param": {"device": "nvme", "nvme_path": "$work/nvme", "max_in_cpu": 0}}}
EOF
common=(--train_file "$work/corpus.txt" --tokenizer_vocab_size 300 --block_size 32
  --config_overrides n_layer=24,n_embd=320,n_head=5,n_positions=32 --do_train True
  --per_device_train_batch_size 1 --learning_rate 1e-3 --logging_steps 1 --no_plot
  --max_steps 2 --deepspeed z3nvme.json --seed 7)

# limited BYTES LOG COMMAND...: COMMAND in the cgroup with BYTES as its limit; its exit status.
limited() {
  local bytes=$1 log=$2
  shift 2
  echo "$bytes" >"$group/$limit_file"
  local status=0
  sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$group" "$@" >"$log" 2>&1 || status=$?
  return $status
}
# phases_within LOG: every "memory phase" line of LOG at most 105% of its plan.
phases_within() {
  grep "^memory phase" "$1" || fail "$1: no measured phases"
  awk '/^memory phase/ { n++; if ($0 !~ /: [0-9.]+% of plan$/) bad = 1;
         split($NF, f, "%"); pct = $(NF-2); sub("%", "", pct); if (pct + 0 > 105) bad = 1 }
       END { exit (n == 0 || bad) }' "$1" || fail "$1: a phase peaked above its plan + 5%"
}
same() { cmp "$1" "$2" || fail "$1 and $2 differ"; }

# A: no limit.
"$zero" train "${common[@]}" --output_dir A --save_steps 1 >A.log 2>&1 || { cat A.log; fail "A"; }
states=$(sed -n 's/.*model states per rank \([0-9.]*\) MiB.*/\1/p' A.log | head -1)
[ -n "$states" ] || fail "A.log: no model-state line"
limit=$(python3 -c "print(int($states * 1048576 / 2))")
echo "model states ${states} MiB; limit $limit bytes"

# B: half the model states: trains with checkpoints; consolidates.
limited "$limit" B.log "$zero" train "${common[@]}" --output_dir B --save_steps 1 ||
  { cat B.log; fail "B under $limit bytes"; }
cat B.log
phases_within B.log
same A/model.safetensors B/model.safetensors
limited "$limit" consolidate.log "$zero" checkpoint consolidate B/checkpoint-2 consolidated ||
  { cat consolidate.log; fail "consolidate under $limit bytes"; }
same A/model.safetensors consolidated/model.safetensors

# C: resume under the same limit: the load streams the shard files into one sub-group's slot at
# a time, so it resumes to step 2 and equals A's model; its plan names the load phase's peak.
rm -rf C && mkdir C && cp -r B/checkpoint-1 C/
limited "$limit" C.log "$zero" train "${common[@]}" --output_dir C --save_steps 1 \
  --resume_from_checkpoint C/checkpoint-1 || { cat C.log; fail "C (resumed) under $limit bytes"; }
cat C.log
grep -q "resumed from" C.log || fail "C.log: not resumed"
phases_within C.log
same A/model.safetensors C/model.safetensors
# Q: a resume under 90% of its planned load phase: refused before anything is allocated, naming
# the load phase.
load=$(awk '/^    load / { for (i = 2; i <= NF; i++) if ($(i + 1) == "MiB") { print $i; exit } }' C.log)
[ -n "$load" ] || fail "C.log: no planned load phase"
tight=$(python3 -c "print(int($load * 1048576 * 0.9))")
rm -rf Q && mkdir Q && cp -r B/checkpoint-1 Q/
status=0
limited "$tight" Q.log "$zero" train "${common[@]}" --output_dir Q --save_steps 1 \
  --resume_from_checkpoint Q/checkpoint-1 || status=$?
cat Q.log
[ "$status" = 2 ] || fail "Q: exit $status, not the refusal (2)"
grep -q "does not fit: load needs .*, the node has .*memory cgroup's limit" Q.log ||
  fail "Q.log does not name the load phase and the cgroup's limit"
[ ! -e Q/model.safetensors ] || fail "Q wrote a model"

# R: 60% of B's planned largest phase: refused before anything is allocated, naming a phase.
largest=$(sed -n 's/.*the largest phase, [a-z ]*, needs \([0-9.]*\) MiB.*/\1/p' B.log | head -1)
[ -n "$largest" ] || fail "B.log: no largest-phase line"
small=$(python3 -c "print(int($largest * 1048576 * 0.6))")
status=0
limited "$small" R.log "$zero" train "${common[@]}" --output_dir R --save_steps 1 || status=$?
cat R.log
[ "$status" = 2 ] || fail "R: exit $status, not the refusal (2)"
grep -q "does not fit: [a-z ]* needs .*, the node has .*memory cgroup's limit" R.log ||
  fail "R.log does not name a phase and the cgroup's limit"
[ ! -e R/model.safetensors ] || fail "R wrote a model"
# S: a unit 12x the sub-group under a limit its whole-unit states' host buffers exceeded.
wide=("${common[@]/n_layer=24,n_embd=320,n_head=5/n_layer=1,n_embd=1024,n_head=8}")
limited $((300 * 1048576)) S.log "$zero" train "${wide[@]}" --output_dir S ||
  { cat S.log; fail "S (a block larger than sub_group_size) under 300 MiB"; }
cat S.log
phases_within S.log
[ -e S/model.safetensors ] || fail "S wrote no model"
echo "memory limit ok"
