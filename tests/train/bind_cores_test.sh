#!/usr/bin/env bash
# zero train --bind_cores_to_rank under mpirun at 2 ranks on one node: each rank reports the CPUs
# it was pinned to, and no CPU is in both sets.
# Usage: bind_cores_test.sh ZERO_CLI TRAIN_FILE OUT_DIR MPIEXEC [MPIEXEC_FLAGS...]
set -euo pipefail
zero=$1 train_file=$2 out=$3 mpiexec=$4
shift 4
rm -rf "$out"
log=$("$mpiexec" "$@" -np 2 -x ZERO_LOG_ALL_RANKS=1 "$zero" train --do_train True \
  --train_file "$train_file" --config_overrides n_layer=1,n_embd=32,n_head=2,n_positions=32 \
  --tokenizer_vocab_size 300 --block_size 32 --max_steps 1 --output_dir "$out" --no_plot \
  --bind_cores_to_rank True 2>&1) || { echo "$log"; exit 1; }
mapfile -t sets < <(sed -n 's/.*bound to CPUs \([0-9,]*\).*/\1/p' <<<"$log")
echo "bound CPU sets: ${sets[*]:-none}"
[ ${#sets[@]} -eq 2 ] || { echo "expected 2 ranks to report their CPUs"; echo "$log"; exit 1; }
shared=$(printf '%s\n' "${sets[@]}" | tr ',' '\n' | sort | uniq -d)
[ -z "$shared" ] || { echo "CPUs bound to both ranks: $shared"; exit 1; }
echo "bind cores ok"
