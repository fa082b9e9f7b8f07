#!/usr/bin/env bash
# On a terminal (a pseudo-terminal from util-linux's `script`), the train progress bar is drawn in
# place on stderr and each log line on stdout starts at the left margin: the bar is erased ("\r",
# ESC[K) before the line, never left in front of "step N/T |".
# Usage: progress_bar_tty_test.sh ZERO TEXT_FILE WORK_DIR
set -euo pipefail
zero=$1 text=$2 work=$3
command -v script > /dev/null || { echo "skipped: no script (util-linux) for a pseudo-terminal"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
script -qfec "'$zero' train --do_train --train_file '$text' \
  --config_overrides n_layer=2,n_embd=64,n_head=2,n_positions=64 --tokenizer_vocab_size 300 \
  --block_size 64 --per_device_train_batch_size 8 --max_steps 120 --logging_steps 30 \
  --output_dir '$work/out' --no_plot" "$work/typescript" > /dev/null ||
  { cat -v "$work/typescript"; exit 1; }
# The terminal's stream cut at every carriage return: a log line must open its piece, after the
# bar's erase sequence at most.
tr '\r' '\n' < "$work/typescript" > "$work/pieces"
lines=$(grep -ac 'step [0-9]*/120 |' "$work/pieces" || true)
bars=$(grep -ac '^.\[Ktrain .* steps/s' "$work/pieces" || true)
behind=$(grep -a 'step [0-9]*/120 |' "$work/pieces" | sed 's/^\x1b\[K//' | grep -av '^step ' || true)
if [ "$lines" -ne 4 ] || [ "$bars" -lt 1 ] || [ -n "$behind" ]; then
  cat -v "$work/typescript"
  echo "FAILED: $lines log lines (4 expected), $bars bar draws; lines behind the bar: $behind" | cat -v
  exit 1
fi
echo "$lines log lines at the margin among $bars bar draws: bar-ok"
