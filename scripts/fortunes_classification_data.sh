#!/usr/bin/env bash
# Labelled documents from the Debian `fortunes` package: each fortune of the chosen files is one
# example, its file's name the label, written as CSV (text,label; the fortune's lines joined by
# spaces, quotes doubled) into train.csv, validation.csv and test.csv of OUT_DIR, about 80/10/10.
# The split is fixed by SEED: each example's bucket is a polynomial hash of its text (computed
# the same by every awk), so it does not depend on the machine or the awk implementation.
# Usage: fortunes_classification_data.sh OUT_DIR [SEED] [CLASS...]
set -euo pipefail
out=${1:?usage: fortunes_classification_data.sh OUT_DIR [SEED] [CLASS...]}
seed=${2:-42}
shift $(( $# >= 2 ? 2 : 1 ))
classes=("$@")
[ ${#classes[@]} -gt 0 ] || classes=(computers politics science startrek)
# ZERO_PARSE_ONLY=1 (scripts/check_doc_commands.py): stop here, before the corpus is read.
[ "${ZERO_PARSE_ONLY:-0}" != 1 ] || { echo "scripts/fortunes_classification_data.sh: the command line parses"; exit 0; }
dir=/usr/share/games/fortunes
for class in "${classes[@]}"; do
  [ -f "$dir/$class" ] || { echo "no $dir/$class: install the Debian package 'fortunes'" >&2; exit 1; }
done
mkdir -p "$out"
for split in train validation test; do echo "text,label" >"$out/$split.csv"; done
for class in "${classes[@]}"; do
  LC_ALL=C awk -v label="$class" -v seed="$seed" -v out="$out" '
    BEGIN { for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i }
    function flush(   h, i, bucket, text, part) {
      text = entry; entry = ""
      gsub(/^[ \t]+|[ \t]+$/, "", text)
      if (text == "") return
      h = seed % 2147483647
      for (i = 1; i <= length(text); i++) h = (h * 31 + ord[substr(text, i, 1)]) % 2147483647
      bucket = h % 10
      part = bucket < 8 ? "train" : (bucket == 8 ? "validation" : "test")
      gsub(/"/, "\"\"", text)
      printf "\"%s\",%s\n", text, label >> (out "/" part ".csv")
    }
    /^%$/ { flush(); next }
    { sub(/\r$/, ""); entry = entry (entry == "" ? "" : " ") $0 }
    END { flush() }' "$dir/$class"
done
for split in train validation test; do
  echo "$split: $(( $(wc -l <"$out/$split.csv") - 1 )) examples"
done
