#!/usr/bin/env bash
# run_clm's `--dataset_name tiny_wiki --dataset_config_name tiny-raw-v1`, as a user meets it:
#  1. the dataset is in the Hub cache as the Hub keeps it (parquet, <config>/<split>-*.parquet,
#     README.md's configs): `zero train` refuses it, exit 2, printing a load_dataset command that
#     keeps the configuration;
#  2. that command, run as printed with the golden venv's datasets, prepares the dataset's Arrow
#     files in the datasets cache (offline: datasets 3.6 asks the Hub before it reads the Hub
#     cache, so a folder named tiny_wiki holding the snapshot's files stands in for the Hub, and
#     load_dataset reads it as it would the Hub's files);
#  3. the same `zero train` trains 2 steps from the Arrow files;
#  4. datasets' own texts of that cache (load_dataset by name, offline), tokenized with the
#     tokenizer zero saved, count the tokens zero's token cache holds, train and validation.
#   datasets_cache_end_to_end_test.sh ZERO PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
zero=$1 python=$2 source_dir=$3 work=$4
if [ -z "$python" ] || ! "$python" -c "import datasets, pyarrow, transformers" 2>/dev/null; then
  echo "SKIP: $python has no datasets, pyarrow or transformers (the golden venv:" \
       "scripts/setup_venv.sh)"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/run" "$work/stand_in" && cd "$work"
export OMP_NUM_THREADS=1 HF_HOME=$work/hf_home HF_HUB_CACHE=$work/hub
export HF_DATASETS_CACHE=$work/datasets HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
unset XDG_CACHE_HOME
fail() { echo "FAIL: $*"; exit 1; }

commit=0123456789abcdef0123456789abcdef01234567
repo=$HF_HUB_CACHE/datasets--tiny_wiki
snapshot=$repo/snapshots/$commit
mkdir -p "$snapshot/tiny-raw-v1" "$repo/refs"
printf %s "$commit" >"$repo/refs/main"
python3 "$source_dir/scripts/lcg_corpus.py" 300 corpus.txt
"$python" - "$snapshot" corpus.txt <<'EOF'
import sys
import pyarrow as pa
import pyarrow.parquet as pq
snapshot, corpus = sys.argv[1:]
lines = open(corpus, encoding="utf-8").read().splitlines(keepends=True)
# wikitext's shape: headings, empty lines, text lines with their "\n".
rows = [t for i, line in enumerate(lines) for t in ([" = Part %d = \n" % i, ""] if i % 50 == 0 else []) + [line]]
for split, part in (("train", rows[:250]), ("validation", rows[250:]), ("test", rows[250:260])):
    pq.write_table(pa.table({"text": part}), f"{snapshot}/tiny-raw-v1/{split}-00000-of-00001.parquet")
with open(f"{snapshot}/README.md", "w") as card:
    card.write("---\nconfigs:\n- config_name: tiny-raw-v1\n  data_files:\n"
               + "".join(f"  - split: {s}\n    path: tiny-raw-v1/{s}-*.parquet\n"
                         for s in ("train", "validation", "test")) + "---\n")
EOF

args=(train --dataset_name tiny_wiki --dataset_config_name tiny-raw-v1 --do_train --do_eval
      --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=32 --tokenizer_vocab_size 300
      --block_size 32 --max_steps 2 --per_device_train_batch_size 2 --output_dir "$work/out"
      --overwrite_output_dir --no_plot)
code=0
(cd run && "$zero" "${args[@]}") >refused.log 2>&1 || code=$?
[ "$code" = 2 ] || { cat refused.log; fail "the Hub cache's parquet: exit $code, not 2"; }
grep -q "its data files are parquet" refused.log || { cat refused.log; fail "no refusal"; }
wanted="python -c \"import datasets; datasets.load_dataset('tiny_wiki', 'tiny-raw-v1')\""
grep -qF "$wanted" refused.log || { cat refused.log; fail "the refusal lacks: $wanted"; }
command=$(grep -oF "$wanted" refused.log | head -1)

ln -s "$snapshot" stand_in/tiny_wiki
(cd stand_in && PATH="$(dirname "$python"):$PATH" sh -c "$command") >prepare.log 2>&1 ||
  { cat prepare.log; fail "the printed command failed: $command"; }
ls "$HF_DATASETS_CACHE"/tiny_wiki/tiny-raw-v1/*/*/tiny_wiki-train.arrow >/dev/null ||
  fail "the command prepared no tiny_wiki-train.arrow in $HF_DATASETS_CACHE"

(cd run && "$zero" "${args[@]}") >trained.log 2>&1 || { cat trained.log; fail "zero train: exit $?"; }
grep -q "tiny_wiki: .*(prepared by datasets)" trained.log || { cat trained.log; fail "not read from the datasets cache"; }
grep -q "^step 2/2 .* eval_loss" trained.log || { cat trained.log; fail "no evaluation at step 2"; }
zero_counts=$(grep -o "token cache: wrote .* (\([0-9]*\) tokens)" trained.log | grep -o "([0-9]* tokens)" | tr -dc '0-9 \n' | xargs)
datasets_counts=$(cd run && "$python" - "$work/out" 2>"$work/count.log" <<'EOF'
import sys
import datasets
import transformers
loaded = datasets.load_dataset("tiny_wiki", "tiny-raw-v1")  # offline: from the datasets cache
tokenizer = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
print(" ".join(str(sum(len(ids) for ids in tokenizer(loaded[split]["text"])["input_ids"]))
               for split in ("train", "validation")))
EOF
)
[ -n "$zero_counts" ] && [ "$zero_counts" = "$datasets_counts" ] ||
  { cat trained.log; fail "tokens (train validation): zero read '$zero_counts', datasets' texts hold '$datasets_counts'"; }
echo "datasets cache end to end ok: refused with '$command', prepared, trained; tokens $zero_counts"
