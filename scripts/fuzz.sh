#!/usr/bin/env bash
# Builds the fuzz harnesses (tests/fuzz) with clang, libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer into build-fuzz/, then runs each for SECONDS and prints executions
# and coverage (libFuzzer's final cov: and ft:) per harness.
#   scripts/fuzz.sh SECONDS [HARNESS...]     (default: all; e.g. safetensors tcp_store)
# Environment: FUZZ_JOBS harnesses at a time (2), JOBS build jobs (2), FUZZ_RSS_MB (2048),
# FUZZ_TIMEOUT_S per input (10), ZERO_SHARED_DATA (../shared/data).
# Seeds: tests/fuzz/corpus/<h> and tests/fuzz/findings/<h> (in-tree), plus small files of the
# shared data folder when present (DeepSpeed configs; the first 4 KiB of each text corpus),
# copied at run time. New inputs go to build-fuzz/fuzz/corpus/<h>, crashes to
# build-fuzz/fuzz/artifacts/<h>/, logs to build-fuzz/fuzz/logs/<h>.log. Exits 1 when a harness
# found something (its artifact is named in the summary): minimise it (-minimize_crash=1), fix the
# reader, and keep the input in tests/fuzz/findings/<h>/ with a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz.sh SECONDS [HARNESS...]}
shift
all=(safetensors ds_config checkpoint tcp_store tokenizer_files tokenizer_json text_data
     arrow_stream labelled_data model_config)
harnesses=("$@")
((${#harnesses[@]})) || harnesses=("${all[@]}")
build=build-fuzz
work=$build/fuzz
shared=${ZERO_SHARED_DATA:-../shared/data}
sanitizers="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"

if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DZERO_FUZZ_LIBFUZZER=ON -DZERO_WITH_CUDA=OFF -DZERO_WITH_MPI=OFF -DZERO_WITH_GLOO=OFF \
    -DZERO_BUILD_BENCHMARKS=OFF \
    -DCMAKE_C_FLAGS="$sanitizers -fno-omit-frame-pointer" \
    -DCMAKE_CXX_FLAGS="$sanitizers -fno-omit-frame-pointer" >/dev/null
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("${h}_fuzz"); done
nice -n 10 ninja -C "$build" -j "${JOBS:-2}" "${targets[@]}"

seed_from_shared() {  # $1 harness, $2 folder: copies small shared inputs when the folder exists
  [[ -d $shared ]] || return 0
  case $1 in
    ds_config) cp "$shared"/ds_configs/*.json "$2"/ 2>/dev/null || true ;;
    text_data)
      for f in "$shared"/tinyshakespeare/input.txt "$shared"/wikitext-2/*.tokens; do
        [[ -f $f ]] && head -c 4096 "$f" >"$2/$(basename "$f").head"
      done ;;
  esac
}

run_one() {  # $1 harness
  local h=$1 seeds=$work/seeds/$1
  mkdir -p "$work/corpus/$h" "$work/artifacts/$h" "$work/logs" "$seeds"
  seed_from_shared "$h" "$seeds"
  local inputs=("$work/corpus/$h" tests/fuzz/corpus/"$h" "$seeds")
  [[ -d tests/fuzz/findings/$h ]] && inputs+=(tests/fuzz/findings/"$h")
  local status=0
  nice -n 10 "$build/tests/fuzz/${h}_fuzz" -max_total_time="$seconds" \
    -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -timeout="${FUZZ_TIMEOUT_S:-10}" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$h/" "${inputs[@]}" >"$work/logs/$h.log" 2>&1 || status=$?
  echo "$status" >"$work/logs/$h.status"
}

pids=()
for h in "${harnesses[@]}"; do
  run_one "$h" &
  pids+=($!)
  while (($(jobs -rp | wc -l) >= ${FUZZ_JOBS:-2})); do wait -n || true; done
done
wait

found=0
printf '%-16s %12s %8s %8s %10s  %s\n' harness executions cov ft corpus result
for h in "${harnesses[@]}"; do
  log=$work/logs/$h.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+[[:space:]].*cov: [0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  result=ok
  if [[ $(cat "$work/logs/$h.status") != 0 ]]; then
    found=1
    result="FOUND: $(ls -t "$work/artifacts/$h" | head -1) (see $log)"
  fi
  printf '%-16s %12s %8s %8s %10s  %s\n' "$h" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corpus:-?}" "$result"
done
exit $found
