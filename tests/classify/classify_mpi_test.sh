#!/usr/bin/env bash
# zero train --task text-classification under mpirun at 1, 2 and 4 ranks with ZeRO-3
# (configs/ds_zero3.json), the same global batch: the same validation loss (1e-5), the same test
# report and confusion matrix, and 25 validation / 23 test examples (not multiples of the world
# size or of the eval batch) each counted once. Also a pretrained LM as the body: the first run's
# classifier is made from an LM checkpoint trained first.
# Usage: classify_mpi_test.sh ZERO SOURCE_DIR WORK_DIR MPIRUN [MPIRUN FLAGS...]
set -euo pipefail
zero=$1 source=$2 work=$3
shift 3
rm -rf "$work" && mkdir -p "$work"
write() {  # FILE COUNT SEED: labelled rows, the label's words mixed with shared ones
  awk -v n="$2" -v seed="$3" 'BEGIN {
    srand(seed); split("sea ship wave sail", t0); split("sword battle crown king", t1);
    split("heart love thee fair", t2); split("the a of and is to my not", s);
    print "text,label"
    for (i = 0; i < n; i++) {
      label = i % 3; line = ""
      for (w = 0; w < 3 + i % 5; w++) {
        word = (w % 2 == 0) ? (label == 0 ? t0[1 + w % 4] : label == 1 ? t1[1 + w % 4] : t2[1 + w % 4]) : s[1 + (i + w) % 8]
        line = line (w ? " " : "") word
      }
      printf "\"%s %d\",%s\n", line, i, (label == 0 ? "sea" : label == 1 ? "war" : "love")
    }
  }' > "$1"
}
write "$work/train.csv" 48 1
write "$work/validation.csv" 25 2
write "$work/test.csv" 23 3
"$zero" train --train_file "$source/README.md" --do_train True --max_steps 2 \
  --config_overrides n_layer=2,n_embd=32,n_head=2,n_positions=32 \
  --tokenizer_vocab_size 400 --output_dir "$work/lm" --no_plot > "$work/lm.log" 2>&1 ||
  { cat "$work/lm.log"; exit 1; }
for np in 1 2 4; do
  "$@" -np $np "$zero" train --task text-classification --model_name_or_path "$work/lm" \
    --train_file "$work/train.csv" --validation_file "$work/validation.csv" \
    --test_file "$work/test.csv" --text_column_names text --max_seq_length 16 \
    --do_train True --do_eval True --do_predict True --per_device_train_batch_size $((4 / np)) \
    --per_device_eval_batch_size 3 --num_train_epochs 1 --learning_rate 2e-3 --save_strategy no \
    --no_plot --deepspeed "$source/configs/ds_zero3.json" --output_dir "$work/out$np" \
    > "$work/np$np.log" 2>&1 || { cat "$work/np$np.log"; exit 1; }
  grep -q '"test_samples": 23' "$work/out$np/test_results.json" || { echo "np $np: not 23 test examples"; exit 1; }
  grep -q '"eval_samples": 25' "$work/out$np/eval_results.json" || { echo "np $np: not 25 validation examples"; exit 1; }
done
cat "$work/np2.log"
report() { sed -n '/precision    recall/,/^weighted avg/p' "$1"; sed -n '/^true \\ predicted/,$p' "$1" | head -4; }
loss() { sed -n 's/.*"eval_loss": \([-0-9.e]*\).*/\1/p' "$1/eval_results.json"; }
for np in 2 4; do
  diff <(report "$work/np1.log") <(report "$work/np$np.log") || { echo "np $np: another report"; exit 1; }
  awk -v a="$(loss "$work/out1")" -v b="$(loss "$work/out$np")" -v np=$np \
    'BEGIN { d = a - b; if (d < 0) d = -d; if (d > 1e-5) { print "np " np ": eval_loss " b " vs " a; exit 1 } }'
done
echo "classification at 1, 2, 4 ranks: same losses and report"
