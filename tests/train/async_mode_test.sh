#!/usr/bin/env bash
# `zero train` in the CPU backend's asynchronous mode (ZERO_CPU_ASYNC=1: the model's kernels on the
# compute stream, the CUDA path's event ordering, here under stream stress) against host mode:
# two ranks, ZeRO-3, evaluation and a checkpoint. The losses, gradient norms, evaluation losses,
# the final model and the checkpoint's model and shards must be byte-identical.
# Usage: async_mode_test.sh ZERO SOURCE_DIR WORK_DIR MPIRUN [MPIRUN FLAGS...]
set -euo pipefail
zero=$1 source=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work"
run() {  # run NAME ZERO_CPU_ASYNC ZERO_STREAM_STRESS
  ZERO_CPU_ASYNC=$2 ZERO_STREAM_STRESS=$3 "${@:4}" -np 2 -x ZERO_CPU_ASYNC -x ZERO_STREAM_STRESS \
    "$zero" train --train_file "$source/docs/ARCHITECTURE.md" --validation_file "$source/README.md" \
    --config_overrides n_layer=2,n_embd=32,n_head=2,n_positions=32 --tokenizer_vocab_size 400 \
    --do_train True --do_eval True --max_steps 4 --per_device_train_batch_size 2 --block_size 32 \
    --logging_steps 1 --save_steps 2 --eval_strategy steps --eval_steps 2 --bf16 True --no_plot \
    --output_dir "$work/$1" --deepspeed "$source/configs/ds_zero3.json" > "$work/$1.log" 2>&1 ||
    { cat "$work/$1.log"; exit 1; }
}
run host 0 0 "$@"
run async 1 20261126 "$@"
values() { grep -o '"\(loss\|grad_norm\|eval_loss\|step\)":[0-9.e+-]*' "$1/metrics.jsonl"; }
[ "$(values "$work/host" | grep -c eval_loss)" -ge 2 ] || { echo "fewer than 2 evaluations"; exit 1; }
diff <(values "$work/host") <(values "$work/async") || { echo "metrics differ"; exit 1; }
for file in model.safetensors checkpoint-4/model.safetensors; do
  cmp "$work/host/$file" "$work/async/$file" || { echo "$file differs"; exit 1; }
done
shards=("$work"/host/checkpoint-4/zero_shard-*.safetensors)
[ "${#shards[@]}" -eq 2 ] || { echo "expected 2 shard files, found ${#shards[@]}"; exit 1; }
for shard in "${shards[@]}"; do
  cmp "$shard" "$work/async/checkpoint-4/$(basename "$shard")" ||
    { echo "$(basename "$shard") differs"; exit 1; }
done
echo "async mode ok: $(values "$work/host" | wc -l) values, model and checkpoint identical"
