#!/usr/bin/env bash
# GPT-2 document classification on a fresh Debian machine: installs what is missing, builds, makes
# labelled documents from the Debian `fortunes` files (computers, politics, science, startrek:
# each file a class; split 80/10/10 fixed by the seed, scripts/fortunes_classification_data.sh),
# and runs `zero train --task text-classification` on 2 MPI ranks with ZeRO-3, as Hugging Face's
# run_classification.py would be run (same flags): a small GPT-2 with a classification head,
# trained from scratch with a byte-level BPE learned on the training texts; per-epoch training and
# validation loss and accuracy, then the test report (per-class precision, recall, F1, support,
# averages, accuracy, as scikit-learn prints it) and the confusion matrix, in
# build/classify_output/test_results.json. Extra arguments go to `zero train`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${ZERO_DEMO_SETUP:-1}" = 1 ]; then
  bash scripts/setup.sh
  bash scripts/build.sh
fi
build=${ZERO_BUILD_DIR:-build}
data=$build/classify_data
scripts/fortunes_classification_data.sh "$data" 42 computers politics science startrek
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

"${mpirun[@]}" "$build/tools/zero" train --task text-classification \
  --train_file "$data/train.csv" --validation_file "$data/validation.csv" \
  --test_file "$data/test.csv" --text_column_names text --label_column_name label \
  --max_seq_length 64 \
  --config_overrides n_layer=2,n_embd=128,n_head=4,n_positions=64,resid_pdrop=0.1,embd_pdrop=0.1,attn_pdrop=0 \
  --tokenizer_vocab_size 2048 \
  --do_train True --do_eval True --do_predict True \
  --per_device_train_batch_size 8 --per_device_eval_batch_size 32 \
  --num_train_epochs 4 --learning_rate 1e-3 --warmup_ratio 0.05 --weight_decay 0.01 \
  --logging_steps 50 --save_strategy no --seed 42 \
  --deepspeed configs/ds_zero3_demo.json \
  --output_dir "$build/classify_output" --overwrite_output_dir True \
  "$@"
