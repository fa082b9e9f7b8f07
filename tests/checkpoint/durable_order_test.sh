#!/usr/bin/env bash
# The order of every save's durable writes (file fsync -> rename -> folder fsync, `latest` last),
# recorded by fsync_recorder (an LD_PRELOAD library wrapping open, fsync, fdatasync, rename and
# mkdir) and checked by durable_order_check.py. A SIGKILL leaves the page cache to reach the disk,
# so the crash tests pass without any fsync; this test fails when one is missing or misplaced.
#   durable_order_test.sh CASE RECORDER ZERO SAVE_TEST SOURCE_DIR WORK_DIR [MPIRUN FLAGS...]
# CASE:
#   world1  the checker's own planted defects (--self-test); the engine's checkpoints alone
#           (checkpoint_save_test's saves over thread ranks at worlds 2 and 4, a tag saved again);
#           `zero train` at world 1: two checkpoints and the final Hugging Face model
#   world2  `zero train` under mpirun at 2 ranks: two checkpoints (the first rotated away by
#           --save_total_limit 1) and the final model
set -euo pipefail
case_name=$1 recorder=$2 zero=$3 save_test=$4 source_dir=$5 work=$6
shift 6
mpirun=("$@")
check=$source_dir/tests/checkpoint/durable_order_check.py
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
failed=()  # the saves whose order is wrong; the test goes on to check the others

# recorded LOG COMMAND...: COMMAND with the recorder preloaded, logging to LOG.
recorded() {
  local log=$1
  shift
  env ZERO_FSYNC_LOG="$work/$log" LD_PRELOAD="$recorder" "$@"
}
# train OUT [LAUNCHER...]: a tiny `zero train` saving checkpoint-2 and checkpoint-4 into OUT.
train() {
  local out=$1
  shift
  "$@" env ZERO_FSYNC_LOG="$work/$out.log" LD_PRELOAD="$recorder" "$zero" train --do_train \
    --train_file "$work/corpus.txt" --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=32 \
    --tokenizer_vocab_size 300 --block_size 32 --max_steps 4 --save_steps 2 \
    --per_device_train_batch_size 2 --learning_rate 3e-3 --output_dir "$work/$out" --no_plot \
    --cache_dir "$work/cache" "${extra[@]}" >"$out.txt" 2>&1 || { cat "$out.txt"; fail "$out"; }
  [ -f "$work/$out/checkpoint-4/zero_checkpoint.json" ] || fail "$out: no checkpoint-4"
  python3 "$check" "$out.log" "$work/$out" || failed+=("$out")
}
python3 "$source_dir/scripts/lcg_corpus.py" 400 corpus.txt

case $case_name in
world1)
  python3 "$check" --self-test
  mkdir engine
  recorded engine.log env TMPDIR="$work/engine" "$save_test" >engine.txt 2>&1 ||
    { cat engine.txt; fail "checkpoint_save_test under the recorder"; }
  python3 "$check" engine.log "$work/engine" || failed+=("checkpoint_save_test")
  extra=()
  train train1
  ;;
world2)
  extra=(--save_total_limit 1)
  train train2 "${mpirun[@]}" -np 2
  [ ! -e "$work/train2/checkpoint-2" ] || fail "train2: checkpoint-2 was not rotated away"
  ;;
*) fail "unknown case $case_name" ;;
esac
[ ${#failed[@]} -eq 0 ] || fail "durable writes out of order in: ${failed[*]}"
echo "durable $case_name ok"
