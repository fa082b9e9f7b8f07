#!/bin/sh
# The run's lines name the model it loads and the architecture it saves, for GPT-2 and for a
# Llama config: "model: <family> (from scratch)" or "model: <family> <folder>", "saved
# .../{config.json,model.safetensors,tokenizer files} (Hugging Face <architecture>)", and
# `zero checkpoint consolidate`'s "(<architecture>, fp32 master weights ...)"; the architecture is
# the one config.json holds.
# Usage: model_lines_test.sh ZERO WORK_DIR TRAIN_TEXT
set -eu
zero=$1 work=$2 text=$3
rm -rf "$work"
mkdir -p "$work/llama_config"
printf '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, "tie_word_embeddings": false}' \
  >"$work/llama_config/config.json"
failed=0
expect() {  # LOG TEXT: the log holds TEXT
  if ! grep -qF -- "$2" "$1"; then
    echo "FAIL: $1 has no line with: $2"
    failed=1
  fi
}
train() {  # NAME MODEL_FLAGS...: a 2-step run saving checkpoint-2, its log in WORK/NAME.log
  name=$1
  shift
  "$zero" train "$@" --train_file "$text" --do_train --block_size 32 --max_steps 2 \
    --per_device_train_batch_size 2 --save_strategy steps --save_steps 2 --no_plot \
    --output_dir "$work/$name" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
}
check_family() {  # NAME FAMILY ARCHITECTURE
  expect "$work/$1.log" "saved $work/$1/{config.json,model.safetensors,tokenizer files} (Hugging Face $3, fp32 weights)"
  grep -q "\"$3\"" "$work/$1/config.json" || { echo "FAIL: $1/config.json is not a $3"; failed=1; }
  "$zero" checkpoint consolidate "$work/$1/checkpoint-2" "$work/$1_consolidated" >"$work/$1_consolidate.log"
  expect "$work/$1_consolidate.log" "($3, fp32 master weights of step 2"
  grep -q "\"$3\"" "$work/$1_consolidated/config.json" || { echo "FAIL: $1_consolidated is not a $3"; failed=1; }
}
small_gpt2="--config_overrides n_layer=2,n_embd=32,n_head=2,n_positions=64 --tokenizer_vocab_size 300"
# shellcheck disable=SC2086
train gpt2 $small_gpt2
expect "$work/gpt2.log" "model: GPT-2 (from scratch), 2 layers"
check_family gpt2 GPT-2 GPT2LMHeadModel
train gpt2_again --model_name_or_path "$work/gpt2"
expect "$work/gpt2_again.log" "model: GPT-2 $work/gpt2, 2 layers"
train llama --config_name "$work/llama_config" --tokenizer_vocab_size 300
expect "$work/llama.log" "model: Llama (from scratch), 2 layers"
check_family llama Llama LlamaForCausalLM
train llama_again --model_name_or_path "$work/llama"
expect "$work/llama_again.log" "model: Llama $work/llama, 2 layers"
expect "$work/llama_again.log" "(Hugging Face LlamaForCausalLM, fp32 weights)"
[ "$failed" = 0 ] || exit 1
echo "model lines name the family and architecture"
