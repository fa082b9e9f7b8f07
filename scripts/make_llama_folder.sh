#!/usr/bin/env bash
# Makes a small Llama model folder from nothing (nothing can be downloaded here): a byte-level BPE
# tokenizer learned by `zero tokenizer train` on the Debian fortunes corpus (vocab.json,
# merges.txt) and a config.json of LlamaForCausalLM (grouped-query attention: 6 query heads on 2
# key/value heads, RoPE, SwiGLU, an untied head) whose vocabulary and bos/eos ids are the
# tokenizer's. The README's Llama run trains it from scratch with `zero train --config_name DIR
# --tokenizer_name DIR`, as run_clm.py trains a config without weights.
# Usage: scripts/make_llama_folder.sh OUT_DIR [ZERO_BINARY]
set -euo pipefail
out=${1:?usage: scripts/make_llama_folder.sh OUT_DIR [ZERO_BINARY]}
zero=${2:-build/tools/zero}
vocab=2048
if [ "${ZERO_PARSE_ONLY:-0}" = 1 ]; then  # scripts/check_doc_commands.py
  echo "make_llama_folder: the command line parses"
  exit 0
fi
corpus=$(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort)
[ -n "$corpus" ] || { echo "make_llama_folder: no fortunes corpus (apt install fortunes)" >&2; exit 2; }
mkdir -p "$out"
# shellcheck disable=SC2086
"$zero" tokenizer train --vocab_size "$vocab" --output "$out" $corpus
eos=$(grep -o '"<|endoftext|>": *[0-9]*' "$out/vocab.json" | grep -o '[0-9]*$')
[ -n "$eos" ] || { echo "make_llama_folder: <|endoftext|> missing from $out/vocab.json" >&2; exit 1; }
cat > "$out/config.json" <<JSON
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "vocab_size": $vocab,
  "hidden_size": 192,
  "intermediate_size": 512,
  "num_hidden_layers": 4,
  "num_attention_heads": 6,
  "num_key_value_heads": 2,
  "max_position_embeddings": 256,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "hidden_act": "silu",
  "initializer_range": 0.02,
  "tie_word_embeddings": false,
  "attention_dropout": 0.0,
  "bos_token_id": $eos,
  "eos_token_id": $eos,
  "torch_dtype": "float32"
}
JSON
echo "make_llama_folder: $out (config.json, vocab.json, merges.txt; vocabulary $vocab, eos $eos)"
