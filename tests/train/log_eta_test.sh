#!/usr/bin/env bash
# The log line's ETA with stdout a file (a Slurm log: no progress bar is drawn there): every
# "step N/T" line names the ETA, which is the steps left at that window's seconds per step, the
# seconds per step read back from the same line's tokens/s (samples per step x block size tokens),
# to the second; the last step's is 0:00.
# Usage: log_eta_test.sh ZERO TEXT_FILE WORK_DIR
set -euo pipefail
zero=$1 text=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
batch=8 block=64 steps=120
"$zero" train --do_train --train_file "$text" --config_overrides n_layer=2,n_embd=64,n_head=2,n_positions=64 \
  --tokenizer_vocab_size 300 --block_size $block --per_device_train_batch_size $batch \
  --max_steps $steps --logging_steps 30 --output_dir "$work/out" --no_plot \
  > "$work/stdout.log" 2> "$work/stderr.log" || { cat "$work/stdout.log" "$work/stderr.log"; exit 1; }
cat "$work/stdout.log"
awk -v tokens_per_step=$((batch * block)) -v steps=$steps '
  /^step [0-9]+\/[0-9]+ / {
    split($2, at, "/")
    tokens = ""; eta = ""
    for (i = 1; i < NF; ++i) {
      if ($(i + 1) == "tokens/s") tokens = $i
      if ($i == "ETA") eta = $(i + 1)
    }
    if (eta == "") { print "FAILED: no ETA in: " $0; bad = 1; next }
    n = split(eta, parts, ":"); seconds = 0
    for (i = 1; i <= n; ++i) seconds = seconds * 60 + parts[i]
    expected = (steps - at[1]) * tokens_per_step / tokens
    if (seconds < expected - 1 || seconds > expected + 1) {
      printf "FAILED: step %d: ETA %s (%d s), steps left x seconds per step = %.2f s\n", at[1], eta, seconds, expected
      bad = 1
    }
    ++lines; last = at[1]; last_eta = eta
  }
  END {
    if (lines != steps / 30) { print "FAILED: " lines " step lines, expected " steps / 30; bad = 1 }
    if (last != steps || last_eta != "0:00") { print "FAILED: the last line (step " last ") ETA " last_eta; bad = 1 }
    if (!bad) print "eta-ok"
    exit bad
  }' "$work/stdout.log"
