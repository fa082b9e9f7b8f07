#!/usr/bin/env bash
# `zero train` (the seeds' command line, shortened) on a tiny model made first, under mpirun and
# over Gloo (launch_ranks): the same logged losses.
#   train_same_losses.sh ZERO SOURCE_DIR WORK_DIR RANKS LAUNCH_RANKS "MPIRUN FLAGS..."
set -euo pipefail
zero=$1 source=$2 work=$3 ranks=$4 launch_ranks=$5 mpirun=$6
rm -rf "$work" && mkdir -p "$work"
"$zero" train --train_file "$source/README.md" --do_train True --max_steps 1 \
  --config_overrides n_layer=2,n_embd=32,n_head=2,n_positions=32,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0 \
  --tokenizer_vocab_size 400 --output_dir "$work/tiny_model" --no_plot >"$work/make_model.log" 2>&1 ||
  { cat "$work/make_model.log"; exit 1; }
cd "$work"
exec "$source/tests/comm/same_losses.sh" "$mpirun -np $ranks" "$launch_ranks --timeout 100 $ranks --" -- \
  "$zero" train --model_name_or_path "$work/tiny_model" --train_file "$source/docs/ARCHITECTURE.md" \
  --do_train True --per_device_train_batch_size 4 --max_steps 12 --learning_rate 3e-3 \
  --logging_steps 2 --save_strategy no --output_dir "$work/out" --overwrite_output_dir True --no_plot \
  --deepspeed "$source/configs/ds_zero3.json"
