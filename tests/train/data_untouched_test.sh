#!/usr/bin/env bash
# `zero train` writes nothing beside its data: the data folder's listing (names, sizes, times and
# modes, the folder's own time included, so a file made and removed shows too) is the same after
# runs on .txt with a validation file (the token cache written, then used), on .csv (converted in
# a scratch folder) and --streaming; the token cache is in HF_HOME/datasets/zero_tokens.
#   data_untouched_test.sh ZERO SOURCE_DIR WORK_DIR
set -euo pipefail
zero=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work/data" && cd "$work"
export OMP_NUM_THREADS=1 HF_HOME=$work/hf_home
unset HF_DATASETS_CACHE
fail() { echo "FAIL: $*"; exit 1; }

python3 "$source_dir/scripts/lcg_corpus.py" 400 data/train.txt
python3 "$source_dir/scripts/lcg_corpus.py" 100 data/valid.txt
{ echo text; sed 's/.*/"&"/' data/train.txt; } >data/train.csv
listing() { (cd "$work/data" && find . -printf '%p %s %T@ %m\n' | sort); }
before=$(listing)

run=0
train() {
  run=$((run + 1))
  "$zero" train --do_train --do_eval --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=32 \
    --tokenizer_vocab_size 300 --block_size 32 --max_steps 2 --per_device_train_batch_size 2 \
    --output_dir "$work/out" --overwrite_output_dir --no_plot "$@" >"run$run.log" 2>&1 ||
    { cat "run$run.log"; fail "zero train $*: exit $?"; }
}
train --train_file data/train.txt --validation_file data/valid.txt
grep -q "token cache: wrote .*$HF_HOME/datasets/zero_tokens/tokens-" run1.log ||
  { cat run1.log; fail "run 1 wrote no token cache in $HF_HOME/datasets/zero_tokens"; }
train --train_file data/train.txt --validation_file data/valid.txt
grep -q "token cache: using .*$HF_HOME/datasets/zero_tokens/tokens-" run2.log ||
  { cat run2.log; fail "run 2 did not use the token cache run 1 wrote"; }
train --train_file data/train.csv
train --train_file data/train.txt --validation_file data/valid.txt --streaming True

after=$(listing)
if [ "$before" != "$after" ]; then
  diff <(echo "$before") <(echo "$after") || true
  fail "a run wrote beside its data (the listing of $work/data changed, above)"
fi
echo "data untouched ok: $run runs"
