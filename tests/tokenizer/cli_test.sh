#!/usr/bin/env bash
# `zero tokenizer train|encode|decode` end to end: train on a small corpus, encode, decode back.
set -euo pipefail
zero="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for i in $(seq 1 300); do
  echo "the cat sat on the mat number $i, naïve café 🙂"
done > "$dir/corpus.txt"
"$zero" tokenizer train --vocab_size 300 --output "$dir/tok" "$dir/corpus.txt"
test -s "$dir/tok/vocab.json" && test -s "$dir/tok/merges.txt"
"$zero" tokenizer encode --tokenizer_name "$dir/tok" "$dir/corpus.txt" > "$dir/ids.txt"
"$zero" tokenizer decode --tokenizer_name "$dir/tok" "$dir/ids.txt" > "$dir/decoded.txt"
cmp "$dir/corpus.txt" "$dir/decoded.txt"
printf 'hello' | "$zero" tokenizer encode --tokenizer_name "$dir/tok" |
  grep -Eq '^[0-9]+( [0-9]+)*$'
set +e
"$zero" tokenizer encdoe --tokenizer_name "$dir/tok" 2> "$dir/err.txt"; code=$?
set -e
test "$code" = 2 && grep -q "did you mean 'encode'" "$dir/err.txt"
set +e
"$zero" tokenizer encode --tokenizer_name "$dir/missing" < /dev/null 2> "$dir/err.txt"; code=$?
set -e
test "$code" != 0 && grep -q "missing" "$dir/err.txt"
# Added tokens in the text are recognised unless --special=false (ordinary text, more ids).
eot=$(printf '<|endoftext|>' | "$zero" tokenizer encode --tokenizer_name "$dir/tok")
test "$(echo "$eot" | wc -w)" = 1
printf 'cat<|endoftext|>' | "$zero" tokenizer encode --tokenizer_name "$dir/tok" | grep -Eq " $eot\$"
test "$(printf '<|endoftext|>' | "$zero" tokenizer encode --special=false \
        --tokenizer_name "$dir/tok" | wc -w)" -gt 1
gpt2="${ZERO_SHARED_DATA:-/nonexistent}/gpt2"
if [ -f "$gpt2/encoder.json" ]; then
  test "$(printf 'hello world' | "$zero" tokenizer encode --tokenizer_name "$gpt2")" = "31373 995"
  test "$(echo '1212 318 617 2420' | "$zero" tokenizer decode --tokenizer_name "$gpt2")" \
    = "This is some text"
fi
echo "cli ok"
