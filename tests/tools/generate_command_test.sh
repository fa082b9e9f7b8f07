#!/usr/bin/env bash
# `zero generate` on a tiny model `zero train` makes first: the prompt and --max_new_tokens new
# ids, in range, the same for the same seed; greedy the same in the CPU's host and asynchronous
# modes; --bf16 runs; a text prompt through the folder's tokenizer; bad input is refused by name.
# (Text and ids against transformers: generate_text_test.py.)
# Usage: generate_command_test.sh ZERO SOURCE_DIR WORK_DIR
set -euo pipefail
zero=$1 source=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$zero" train --train_file "$source/README.md" --do_train True --max_steps 2 --use_cpu \
  --config_overrides n_layer=2,n_embd=32,n_head=2,n_positions=32 --num_samples 0 \
  --tokenizer_vocab_size 400 --output_dir "$work/model" --no_plot > "$work/train.log" 2>&1 ||
  { cat "$work/train.log"; exit 1; }
generate() { "$zero" generate --model "$work/model" --prompt_ids 5,17,3 "$@" 2> "$work/stderr.log"; }
fail() { echo "FAIL: $*"; cat "$work/stderr.log"; exit 1; }

greedy=$(generate --max_new_tokens 40 --use_cpu)  # past n_positions: the window slides
echo "greedy: $greedy"
[ "$(echo "$greedy" | tr ',' '\n' | wc -l)" -eq 43 ] || fail "expected 43 ids"
[ "${greedy%%,*}" = 5 ] || fail "the prompt is not first"
echo "$greedy" | tr ',' '\n' | awk '$1 < 0 || $1 >= 400 { bad = 1 } END { exit bad }' ||
  fail "an id out of the vocabulary"
grep -q "zero generate: device cpu (--use_cpu), fp32" "$work/stderr.log" || fail "no device line"
[ "$(ZERO_CPU_ASYNC=1 ZERO_STREAM_STRESS=7 generate --max_new_tokens 40 --use_cpu)" = "$greedy" ] ||
  fail "asynchronous mode generated other tokens"
sampled=$(generate --max_new_tokens 12 --do_sample --top_k 8 --seed 4 --use_cpu)
[ "$(generate --max_new_tokens 12 --do_sample --top_k 8 --seed 4 --use_cpu)" = "$sampled" ] ||
  fail "the same seed sampled other tokens"
bf16=$(generate --max_new_tokens 12 --bf16 --use_cpu)
[ "$(echo "$bf16" | tr ',' '\n' | wc -l)" -eq 15 ] || fail "--bf16: expected 15 ids"
grep -q "fp32\|bf16" "$work/stderr.log" && grep -q ", bf16" "$work/stderr.log" || fail "--bf16 not named"
text=$("$zero" generate --model_name_or_path "$work/model" --prompt "The engine" --max_new_tokens 8 \
  --use_cpu 2> "$work/stderr.log") || fail "--prompt through the folder's tokenizer"
[ "${text#The engine}" != "$text" ] || fail "the text does not start with the prompt: $text"
if generate --bf16 --fp16 --use_cpu > /dev/null; then fail "--bf16 --fp16 accepted"; fi
grep -q "\-\-bf16 and \-\-fp16 are exclusive" "$work/stderr.log" || fail "no reason for --bf16 --fp16"
if generate --max_new_tokens -1 --use_cpu > /dev/null; then fail "--max_new_tokens -1 accepted"; fi
grep -q "max_new_tokens" "$work/stderr.log" || fail "no reason for --max_new_tokens -1"
echo "generate command ok"
