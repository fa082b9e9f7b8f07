#!/usr/bin/env bash
# The seeds' command line (issue 13's acceptance), adapted in launcher, paths and size only:
#   mpirun -np 2 zero train --model_name_or_path <dir> --train_file <text> --validation_file <text>
#     --do_train True --do_eval True --evaluation_strategy steps --per_device_train_batch_size 4
#     --per_device_eval_batch_size 4 --num_train_epochs <fraction> --save_steps N --eval_steps N
#     --output_dir out --deepspeed configs/ds_zero3.json
# on a tiny model made first by `zero train` from scratch (the repository's own docs as text).
# Checks every output file and that the evaluation loss fell.
# Usage: seeds_command_test.sh ZERO SOURCE_DIR WORK_DIR MPIRUN [MPIRUN FLAGS...]
set -euo pipefail
zero=$1 source=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work"
"$zero" train --train_file "$source/README.md" --do_train True --max_steps 1 \
  --config_overrides n_layer=2,n_embd=32,n_head=2,n_positions=32,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0 \
  --tokenizer_vocab_size 400 --output_dir "$work/tiny_model" --no_plot > "$work/make_model.log" 2>&1
"$@" -np 2 "$zero" train --model_name_or_path "$work/tiny_model" \
  --train_file "$source/docs/ARCHITECTURE.md,$source/docs/engine.md" \
  --validation_file "$source/README.md" \
  --do_train True --do_eval True --evaluation_strategy steps \
  --per_device_train_batch_size 4 --per_device_eval_batch_size 4 --num_train_epochs 0.6 \
  --learning_rate 3e-3 --save_steps 10 --eval_steps 10 --logging_steps 10 \
  --output_dir "$work/out" --deepspeed "$source/configs/ds_zero3.json" > "$work/train.log" 2>&1 ||
  { cat "$work/train.log"; exit 1; }
cat "$work/train.log"
for file in config.json model.safetensors vocab.json merges.txt tokenizer_config.json \
  trainer_state.json train_results.json eval_results.json all_results.json metrics.jsonl \
  checkpoint-10/model.safetensors; do
  [ -f "$work/out/$file" ] || { echo "missing output_dir/$file"; exit 1; }
done
# The evaluation losses in order: the last must be below the first.
losses=$(grep -o '"eval_loss":[0-9.e+-]*' "$work/out/metrics.jsonl" | cut -d: -f2)
first=$(echo "$losses" | head -1) last=$(echo "$losses" | tail -1)
[ "$(echo "$losses" | wc -l)" -ge 2 ] || { echo "fewer than 2 evaluations"; exit 1; }
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
  { echo "eval loss did not fall: $first -> $last"; exit 1; }
echo "seeds command ok: eval loss $first -> $last"
