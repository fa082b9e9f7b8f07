#!/usr/bin/env bash
# zero train --task text-classification learns, in fp32, bf16 or fp16 (the dynamic loss scaler):
# a GPT-2 of one layer from scratch reaches eval_accuracy >= 0.85 on 90 held-out rows of three
# classes whose texts draw their topic words from disjoint vocabularies (chance is 1/3; the largest
# class is 37% of the rows). Two runs: AdamW, the default, and SGD. SGD's step is proportional to
# the gradient, so a loss scale not undone (or undone twice) stops it; AdamW's step is nearly
# invariant to a constant factor on the gradients and trains through that defect.
# Measured on 20 data and training seeds x 3 precisions: AdamW (2 epochs, 76 steps) 0.956-1.0, SGD
# (4 epochs, 152 steps) 0.944-1.0; the seeds below reach 0.97-1.0. With the loss scale dropped in
# engine_classifier.cc, fp16 SGD stays at chance (0.4).
# Usage: classify_learns_test.sh ZERO WORK_DIR fp32|bf16|fp16
set -euo pipefail
zero=$1 work=$2 precision=$3
case $precision in
  fp32) flags=() ;;
  bf16 | fp16) flags=("--$precision") ;;
  *) echo "classify_learns_test.sh: precision '$precision' is not fp32, bf16 or fp16"; exit 2 ;;
esac
rm -rf "$work" && mkdir -p "$work"
write() {  # FILE COUNT SEED: each row's even words from its label's vocabulary, odd ones shared
  awk -v n="$2" -v seed="$3" 'BEGIN {
    srand(seed)
    split("sea ship wave sail tide harbor anchor shore", w0)
    split("sword battle crown king siege army shield spear", w1)
    split("heart love thee fair kiss sweet rose dear", w2)
    split("the a of and is to my not where with", s)
    name[0] = "sea"; name[1] = "war"; name[2] = "love"
    print "text,label"
    for (i = 0; i < n; i++) {
      label = int(rand() * 3); words = 4 + int(rand() * 5); line = ""
      for (w = 0; w < words; w++) {
        k = 1 + int(rand() * 8)
        word = w % 2 ? s[1 + int(rand() * 10)] : label == 0 ? w0[k] : label == 1 ? w1[k] : w2[k]
        line = line (w ? " " : "") word
      }
      printf "\"%s\",%s\n", line, name[label]
    }
  }' > "$1"
}
write "$work/train.csv" 300 1
write "$work/validation.csv" 90 101
accuracy() { sed -n 's/.*"eval_accuracy": \([-0-9.e]*\).*/\1/p' "$1/eval_results.json"; }
reached=""
for run in "adamw --learning_rate 3e-3 --num_train_epochs 2" \
           "sgd --optim sgd --learning_rate 0.3 --num_train_epochs 4"; do
  read -r name options <<< "$run"
  # shellcheck disable=SC2086  # the options are words
  "$zero" train --task text-classification --train_file "$work/train.csv" \
    --validation_file "$work/validation.csv" --text_column_names text --label_column_name label \
    --max_seq_length 12 --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=16 \
    --tokenizer_vocab_size 300 --do_train --do_eval --per_device_train_batch_size 8 --seed 1 \
    --save_strategy no --no_plot --output_dir "$work/$name" ${flags[@]+"${flags[@]}"} $options \
    > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; echo "$precision $name: zero train failed"; exit 1; }
  grep -q '"eval_samples": 90' "$work/$name/eval_results.json" ||
    { echo "$precision $name: not 90 validation examples"; exit 1; }
  got=$(accuracy "$work/$name")
  awk -v a="$got" 'BEGIN { exit !(a >= 0.85) }' || {
    grep -E '^epoch|loss_scale' "$work/$name.log"
    echo "$precision $name: eval_accuracy '$got' < 0.85 on a separable set (chance 1/3)"; exit 1; }
  reached="$reached $name $got"
done
echo "$precision classification learns:$reached"
