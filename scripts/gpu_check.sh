#!/usr/bin/env bash
# What a GPU must verify, in one command of under 10 minutes, and the build that carries it there.
#
# The next GPU run (issue 42 item 1), prepared here with `scripts/gpu_check.sh build` and run in
# one device call (carry [".device"], timeout_s 600):
#
#   bash scripts/gpu_check.sh run --bundle .device/gpu_bundle.tar.xz --results $OUT/gpu_check --budget 540
#
#   scripts/gpu_check.sh build [--output FILE]
#       Here (no GPU needed): configures build-gpu/ without -march=native (-DZERO_GPT2_NATIVE=OFF,
#       so the GPT-2 CPU kernels run on any x86-64 host CPU), builds the programs below and bundles
#       them with scripts/bundle.sh --target-cuda (the GPU machine's PyTorch wheels supply CUDA's
#       libraries) into FILE, default .device/gpu_bundle.tar.xz (git-ignored; a device run carries
#       `.device`), with the train step's data: the GPT-2 tokenizer and tiny shakespeare
#       (../shared/data) and a Llama folder made here (scripts/make_llama_folder.sh: a tokenizer
#       learned on the fortunes corpus, a GQA LlamaForCausalLM config.json). Refuses a result over
#       60 MiB (a device run carries at most 64 MiB in all).
#
#   scripts/gpu_check.sh run [--bundle FILE | --from-build DIR] [--results DIR] [--budget S] [STEP...]
#       On the GPU machine (or here, where the GPU steps report that no device is visible): prints
#       a time plan, then runs the named steps, all by default, in this order, each under its own
#       time limit cut to what is left of the budget (S seconds, default 540; a step whose
#       estimate no longer fits is not run and counts as failed):
#         env        zero env, nvidia-smi, the host CPU, where compute-sanitizer is, zero env
#                    --check_comm (NCCL over device buffers)
#         tests      every cuda-labelled test program; each case named in the log with its result,
#                    failing when one fails or has none, or when a required case (required_cases
#                    below: issue 42's eight never run on a GPU, the Llama family's, cuDNN's
#                    native grouped-query attention against the repeat path) did not pass;
#                    the "measured:" lines the bf16 bounds print, as a table
#         memcheck   compute-sanitizer --tool memcheck over the kernel tests (small shapes); fails
#                    when compute-sanitizer is found nowhere (gpu_check_lib.sh says where it looks)
#         train      zero train on the default path (bf16, cuDNN's attention) compared step by step
#                    with the same command on this machine's CPU (started in the background when
#                    the run starts, with the bundled binary): GPT-2 124M at B 4, T 256 and the
#                    bundled Llama folder at B 8, T 128, each at stages 0 and 3, 20 steps; fails
#                    when a step's loss is further from the CPU's than the tolerance
#                    (compare_tolerance: GPT-2 4e-2, Llama 3e-3 nats).
#                    Then the speed runs: GPT-2 124M from scratch on tiny shakespeare, B 16, T 1024,
#                    bf16, AdamW, no dropout, stages 0 and 3: tokens/s, MFU, loss, the ledger's and
#                    nvidia-smi's peaks beside --dry_run's plan; stage 0 with the time breakdown
#                    and kernel profile, with the tiled attention, and stage 3 with ZeRO-Offload
#         racecheck  compute-sanitizer --tool racecheck over the kernel tests
#         kernels    gpt2_cuda_bench: every GPT-2 CUDA kernel of today at 124M shapes (B 16,
#                    T 1024, bf16 GEMMs), time per call and its rate
#         torch      benchmarks/gpt2_gpu_torch.py: PyTorch eager and torch.compile GPT-2 124M,
#                    B 16, T 1024, bf16 autocast, fused AdamW: tokens/s, MFU, peak memory
#       A rerun names only the steps to repeat: `scripts/gpu_check.sh run tests memcheck`.
#       Writes DIR/summary.md (one row per step: status, seconds, the numbers) and at most one
#       log per step (7 logs, each cut to 16 MiB) into DIR, default
#       benchmarks/results/gpu_check_<date>_<device>. Exits 0 when every step that ran passed (a
#       step without a GPU is "skipped: no CUDA device"), 1 otherwise.
#
#   scripts/gpu_check.sh selftest
#       The dry mode (no GPU, no build): each decision of the steps above (gpu_check_lib.sh) fed
#       made-up logs, programs and folders: losses out of the tolerance, a missing, skipped or
#       failed required case, no compute-sanitizer, a step over the budget. Exit 0 when each
#       passes what it must and fails what it must.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/gpu_check_lib.sh
source "$root/scripts/gpu_check_lib.sh"
cuda_tests=(core_cuda_test gpt2_cuda_test gpt2_compute_cuda_test llama_cuda_test attention_cudnn_test
            optim_cuda_test nccl_communicator_test train_cuda_test)
programs=(zero "${cuda_tests[@]}" gpt2_cuda_bench)
kernel_tests=(gpt2_cuda_test gpt2_compute_cuda_test llama_cuda_test optim_cuda_test core_cuda_test)
all_steps=(env tests memcheck train racecheck kernels torch)
# The cases that must pass by name on a device: the eight `cuda` cases issue 42 found in no GPU
# log (the default bf16 path: qkv/atty through cuDNN, cuBLASLt's bf16 bias epilogue, GELU's
# backward inside fc's, generation on the device, the overlapped offload step), the Llama
# family's on the device, grouped-query attention on cuDNN without repeating k and v
# (ZERO_CUDNN_NATIVE_GQA=1) against the default path that repeats them, and ZeRO-1/2/3 at worlds
# 2 and 4 on one device through the thread communicator (issue 42 item 6) against its CPU run,
# and 16-bit accumulated gradients stepped unit by unit on the device (fp16; bf16 with bf16
# accumulation) against the CPU's.
required_cases=(
  CudnnAttentionTest.ReadsAndWritesBf16ActivationsInPlace
  CudnnAttentionTest.TheTiledKernelsTakeBf16ActivationsWidened
  GPT2ComputeCudaTest.MatchesTheCpuComputeWithoutAttentionDropout
  GPT2ComputeCudaTest.NextTokenLogitsAndGreedyGenerationMatchTheCpu
  GPT2KernelLinearCudaTest.LinearBackwardAppliesGeluWhereItReadsDout
  Gpt2CudaTest.GeluStagedBiasPassMatchesTheUnfusedPasses
  Gpt2CudaTest.LinearForwardWritesA16BitOutWithTheStoredBias
  TrainCuda.EvaluationAfterAnOverlappedOffloadStepMatchesTheCpu
  GPT2ComputeCudaTest.LlamaFamilyMatchesTheCpuCompute
  LlamaCuda.RmsNormMatchesTheCpuKernels
  LlamaCuda.RopeMatchesTheCpuKernels
  LlamaCuda.SwigluMatchesTheCpuKernels
  LlamaCuda.DecoderStepsMatchTheCpuDecoder
  CudnnAttentionTest.NativeGroupedQueryAttentionMatchesTheRepeatedPath
  GPT2ComputeCudaTest.LlamaFamilyWithNativeGroupedQueryAttentionMatchesTheCpuCompute
  TrainCuda.ZeroStagesAtWorlds2And4OnOneDeviceMatchTheCpuThreadRun
  TrainCudaSixteenBitAccumulation.UnitByUnitStepsMatchTheCpuRunAtStages0And3
)
max_bundle_bytes=$((60 * 1024 * 1024))

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit "${1:-2}"
}
die() { echo "gpu_check.sh: $*" >&2; exit 2; }
# ZERO_PARSE_ONLY=1 (scripts/check_doc_commands.py): stop once the arguments are checked.
stop_if_parse_only() {
  [ "${ZERO_PARSE_ONLY:-0}" != 1 ] || { echo "scripts/gpu_check.sh: the command line parses"; exit 0; }
}

build() {
  local output=$root/.device/gpu_bundle.tar.xz
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --output) output=${2:?--output needs a file}; shift 2 ;;
      -h|--help) usage 0 ;;
      *) die "build: unknown argument '$1' (see --help)" ;;
    esac
  done
  stop_if_parse_only
  local build_dir=${ZERO_GPU_BUILD_DIR:-$root/build-gpu}
  # RelWithDebInfo as scripts/build.sh, so ccache serves every file but the GPT-2 kernels; the
  # bundle strips the debug info.
  # cuDNN's attention needs the cudnn_frontend headers: a bundle without it would measure the
  # tiled kernels instead, so no headers is an error here.
  local frontend
  frontend=$(bash "$root/scripts/cudnn_frontend.sh") ||
    die "build: no cudnn_frontend headers (scripts/cudnn_frontend.sh failed)"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DZERO_WITH_CUDA=ON -DZERO_GPT2_NATIVE=OFF -DZERO_CUDNN_FRONTEND_INCLUDE="$frontend" >/dev/null
  cmake --build "$build_dir" -j "$(nproc)" --target "${programs[@]}"
  local executables=() program path
  for program in "${programs[@]}"; do
    path=$(find "$build_dir" -type f -name "$program" -perm -u+x | head -n 1)
    [[ -n "$path" ]] || die "build: $program was not built in $build_dir"
    executables+=("$path")
  done
  local staging
  staging=$(mktemp -d)
  trap 'rm -rf "$staging"' RETURN
  bash "$root/scripts/bundle.sh" --output "$staging/bundle" --target-cuda "${executables[@]}"
  # The train step's data (../shared/data does not travel to the device): the GPT-2 tokenizer and
  # tiny shakespeare, into the bundle only (git-ignored), never into the project.
  local data=${ZERO_SHARED_DATA:-$root/../shared/data}
  if [[ -f "$data/gpt2/vocab.json" && -f "$data/tinyshakespeare/input.txt" ]]; then
    mkdir -p "$staging/bundle/data/gpt2"
    cp "$data/gpt2/vocab.json" "$data/gpt2/merges.txt" "$staging/bundle/data/gpt2/"
    cp "$data/tinyshakespeare/input.txt" "$staging/bundle/data/"
  else
    echo "gpu_check.sh: no $data/gpt2 or tinyshakespeare: the train step will be skipped" >&2
  fi
  # The train step's Llama folder, made here (the GPU machine has no fortunes corpus).
  bash "$root/scripts/make_llama_folder.sh" "$staging/bundle/data/llama" "${executables[0]}" >/dev/null ||
    echo "gpu_check.sh: scripts/make_llama_folder.sh failed: the train step's Llama runs will fail" >&2
  # The commit the programs were built from (the device's copy of the checkout may carry another
  # HEAD: the summary names this one).
  echo "$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- . ':!benchmarks/results' || echo ' (with uncommitted changes)')" \
    >"$staging/bundle/commit.txt"
  mkdir -p "$(dirname "$output")"
  tar -C "$staging" -cJf "$output.partial" bundle
  local bytes
  bytes=$(stat -c %s "$output.partial")
  if [[ $bytes -gt $max_bundle_bytes ]]; then
    rm -f "$output.partial"
    die "build: the bundle is $((bytes / 1048576)) MiB compressed, over the $((max_bundle_bytes / 1048576)) MiB a device run can carry"
  fi
  mv "$output.partial" "$output"
  echo "gpu_check.sh: $output ($((bytes / 1048576)) MiB, ${#programs[@]} programs); on the GPU machine: bash scripts/gpu_check.sh run --bundle ${output#"$root"/} --results \$OUT/gpu_check --budget 540"
}

# ---- run ----
results=""
summary=""
failures=0
gpu_count=0
bin=""

# Puts CUDA's libraries from the target's PyTorch wheels (nvidia-*) and toolkit on the path.
cuda_library_path() {
  local python site folders=()
  for python in python3 /opt/torch/.venv/bin/python3; do
    command -v "$python" >/dev/null || continue
    site=$("$python" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) || continue
    local directory
    for directory in $site; do
      [[ -d "$directory/nvidia" ]] || continue
      while IFS= read -r folder; do folders+=("$folder"); done < <(
        find "$directory/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u)
    done
    break
  done
  for directory in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d "$directory" ]] && folders+=("$directory")
  done
  local joined
  joined=$(IFS=:; echo "${folders[*]+"${folders[*]}"}")
  echo "$joined"
}

# record STEP STATUS SECONDS NOTE: one row of the summary.
record() {
  printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" >>"$summary"
  echo "gpu_check.sh: $1: $2 (${3} s) $4"
  [[ "$2" == failed* ]] && failures=$((failures + 1))
  return 0
}

# step NAME LIMIT_SECONDS FUNCTION: runs FUNCTION with its output in NAME.log (cut to 16 MiB).
step() {
  local name=$1 limit=$2 function=$3 log="$results/$1.log" start status note
  start=$(date +%s)
  export STEP_DEADLINE=$((start + limit - 10))
  timeout --signal=TERM --kill-after=10 "$limit" bash -c "$function" >"$log" 2>&1 &&
    status=0 || status=$?
  local seconds=$(( $(date +%s) - start ))
  truncate -s '<16M' "$log"
  note=$(grep -a '^NOTE: ' "$log" | sed 's/^NOTE: //' | paste -sd';' || true)
  if grep -aq '^SKIPPED: ' "$log"; then
    record "$name" "skipped: $(grep -a '^SKIPPED: ' "$log" | head -n 1 | sed 's/^SKIPPED: //')" "$seconds" "$note"
  elif [[ $status -eq 124 || $status -eq 137 ]]; then
    record "$name" "failed: over its ${limit} s limit" "$seconds" "$note"
  elif [[ $status -ne 0 ]]; then
    record "$name" "failed (exit $status; $name.log)" "$seconds" "$note"
  else
    record "$name" "passed" "$seconds" "$note"
  fi
}

step_env() {
  "$BIN/zero" env || return 1
  if command -v nvidia-smi >/dev/null; then nvidia-smi || true; fi
  echo "host CPU: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores (the train step's CPU runs)"
  echo "compute-sanitizer: $(find_compute_sanitizer || true)"
  if [[ $GPU_COUNT -eq 0 ]]; then
    "$BIN/zero" env --check_comm || return 1
    echo "NOTE: no CUDA device: checked the host communicator only"
    return 0
  fi
  "$BIN/zero" env --check_comm | tee /dev/stderr | grep -q 'comm: nccl rank 0/1: all_reduce(sum of rank+1) = 1 (expected 1), device buffers'
  echo "NOTE: NCCL all_reduce over device buffers at world 1 passed"
}

# Every cuda test program, each case named in the log with its result (check_cases), the required
# cases passing on a device, and the bounds' measured values (measured_bounds).
step_tests() {
  local test failed=0 status tests work
  read -ra tests <<<"$CUDA_TESTS"
  work=$(mktemp -d)
  : >"$work/listed"
  : >"$work/all"
  for test in "${tests[@]}"; do
    echo "==== $test"
    if ! "$BIN/$test" --gtest_list_tests >"$work/list" 2>&1; then
      cat "$work/list"
      echo "FAILED: $test --gtest_list_tests"
      failed=$((failed + 1))
      continue
    fi
    gtest_listed_cases <"$work/list" >>"$work/listed"
    status=0
    "$BIN/$test" --gtest_color=no >"$work/out" 2>&1 || status=$?
    tee -a "$work/all" <"$work/out"
    # 77: cases skipped themselves (tests/common/skip_status.h): all of them without a device; on
    # a device the multi-rank cases of a world-1 run; check_cases below holds the rest.
    if [[ $status -ne 0 && $status -ne 77 ]]; then
      echo "FAILED: $test (exit $status)"
      failed=$((failed + 1))
    fi
  done
  echo "---- every case of the ${#tests[@]} programs, by name"
  local skipped_ok=0
  [[ $GPU_COUNT -gt 0 ]] || skipped_ok=1
  # shellcheck disable=SC2086  # one argument per required case
  CASES_SKIPPED_OK=$skipped_ok check_cases "$work/listed" "$work/all" $REQUIRED_CASES >"$work/cases" ||
    failed=$((failed + 1))
  cat "$work/cases"
  measured_bounds "$work/all"
  local passed skipped
  passed=$(grep -c ': passed$' "$work/cases" || true)
  skipped=$(grep -c ': skipped$' "$work/cases" || true)
  rm -rf "$work"
  [[ $failed -eq 0 ]] || { echo "NOTE: $failed test program(s) or case checks failed"; return 1; }
  if [[ $GPU_COUNT -gt 0 ]]; then
    echo "NOTE: ${#tests[@]} test programs: $passed cases passed, $skipped skipped; the $(wc -w <<<"$REQUIRED_CASES") required cases passed"
  else
    echo "SKIPPED: no CUDA device (the tests skipped themselves; the $(wc -w <<<"$REQUIRED_CASES") required cases are in their lists)"
  fi
}

# compute-sanitizer over the kernel tests; no compute-sanitizer on a device is a failure.
sanitize() {
  local tool=$1 test failed=0 found sanitizer
  [[ $GPU_COUNT -gt 0 ]] || { echo "SKIPPED: no CUDA device"; return 0; }
  found=$(find_compute_sanitizer) || { echo "$found"; echo "NOTE: $tool not run: compute-sanitizer not found"; return 1; }
  sanitizer=${found%% (*}
  echo "compute-sanitizer: $found, $("$sanitizer" --version 2>&1 | tail -n 1)"
  for test in $KERNEL_TESTS; do
    echo "==== compute-sanitizer --tool $tool $test"
    # The wrapper script execs the program: the sanitizer follows it (--target-processes all).
    "$sanitizer" --tool "$tool" --target-processes all --error-exitcode 9 \
      "$BIN/$test" --gtest_color=no --gtest_brief=1 || { echo "FAILED: $test under $tool"; failed=$((failed + 1)); }
  done
  [[ $failed -eq 0 ]] || { echo "NOTE: $tool found errors in $failed program(s) ($found)"; return 1; }
  echo "NOTE: $tool clean over $KERNEL_TESTS ($found)"
}
step_memcheck() { sanitize memcheck; }
step_racecheck() { sanitize racecheck; }

step_kernels() {
  [[ $GPU_COUNT -gt 0 ]] || { echo "SKIPPED: no CUDA device"; return 0; }
  local output
  output=$("$BIN/gpt2_cuda_bench" --batch 16 --seq 1024) || { echo "$output"; return 1; }
  echo "$output"
  echo "NOTE: $(grep -a '^total' <<<"$output" | head -n 1)"
}

# ---- train: the default path against the CPU ----
# The runs compared with the CPU (ZERO_GPU_CHECK_COMPARE, default "gpt2:0 gpt2:3 llama:0 llama:3":
# MODEL:STAGE). gpt2: GPT-2 124M from scratch (the speed runs' model, tokenizer and data) at B 4,
# T 256; llama: the bundled Llama folder (make_llama_folder.sh: 4 layers, width 192, 6 query
# heads on 2 key/value heads, vocabulary 2048) at B 8, T 128. Both bf16 without dropout (the
# default path: cuDNN's attention, bf16 qkv/atty and logits), 20 steps, each step's loss logged.
# Sets the array `arguments` for OUTPUT (the device picks the backend; append --use_cpu True).
compare_arguments() {
  local model=$1 stage=$2 output=$3 data=$BIN/../data
  printf '{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "bf16": {"enabled": true}, "zero_optimization": {"stage": %d}}\n' \
    "$stage" >"$output.ds.json"
  arguments=(train --train_file "$data/input.txt" --do_train True --max_steps 20 --weight_decay 0.1
             --logging_steps 1 --bf16 True --seed 42 --save_strategy no --deepspeed "$output.ds.json"
             --output_dir "$output" --overwrite_output_dir True)
  case "$model" in
    gpt2) arguments+=(--model_type gpt2 --config_overrides "attn_pdrop=0,resid_pdrop=0,embd_pdrop=0"
                      --tokenizer_name "$data/gpt2" --block_size 256 --per_device_train_batch_size 4
                      --learning_rate 6e-4 --warmup_steps 5) ;;
    llama) arguments+=(--config_name "$data/llama" --tokenizer_name "$data/llama" --block_size 128
                       --per_device_train_batch_size 8 --learning_rate 3e-3 --warmup_steps 5) ;;
    *) echo "gpu_check.sh: unknown model '$model' in ZERO_GPU_CHECK_COMPARE (gpt2, llama)" >&2; return 2 ;;
  esac
}

# The largest |GPU loss - CPU loss| (nats) allowed at any step of MODEL's run, both in bf16: 5×
# the largest |bf16 - fp32| the CPU measured over the same command's 20 steps (zero train
# --use_cpu here, 2026-11-29), rounded up to one digit: GPT-2 7.8e-3 (at step 7, where the loss
# falls fastest) -> 4e-2; Llama 5.8e-4 (step 5) -> 3e-3 (trainer_test's tiny GPT-2: 4.8e-4 over
# 12 steps). The device's bf16 run shares the CPU's bf16 parameters and GEMM-input roundings and
# differs in the activations it also keeps in bf16 (q, k, v, the attention's probabilities,
# atty, the logits): roundings of the size whose whole effect that distance measures. A wrong
# gradient or a missed update moves the loss by tenths within 20 steps. docs/kernels.md.
compare_tolerance() {
  case "$1" in
    gpt2) echo "${ZERO_GPU_CHECK_TOLERANCE_GPT2:-4e-2}" ;;
    llama) echo "${ZERO_GPU_CHECK_TOLERANCE_LLAMA:-3e-3}" ;;
  esac
}

# The compared runs on this machine's CPU, one after another into CPU_REFS/cpu_MODEL_sSTAGE/ with
# .status (the exit code) beside each; started in the background when `run` starts (the GPU steps
# before train leave the CPU idle), half the cores, niced. A TERM stops the run in progress.
cpu_references() {
  local run model stage output child=""
  trap '[[ -n $child ]] && kill "$child" 2>/dev/null; exit 143' TERM
  for run in $COMPARE_RUNS; do
    model=${run%%:*} stage=${run#*:} output=$CPU_REFS/cpu_${model}_s$stage
    [[ $model == llama && ! -f $BIN/../data/llama/config.json ]] && { echo 2 >"$output.status"; continue; }
    compare_arguments "$model" "$stage" "$output" 2>"$output.log" || { echo 2 >"$output.status"; continue; }
    OMP_NUM_THREADS=$CPU_THREADS nice -n 10 "$BIN/zero" "${arguments[@]}" --use_cpu True >"$output.log" 2>&1 &
    child=$!
    local status=0
    wait "$child" || status=$?
    child=""
    echo "$status" >"$output.status"
  done
}

# Each compared run on the device, into WORK/gpu_MODEL_sSTAGE/ (.status beside it).
device_compare_runs() {
  local run model stage gpu status
  for run in $COMPARE_RUNS; do
    model=${run%%:*} stage=${run#*:} gpu=$WORK/gpu_${model}_s$stage
    echo "==== zero train, $model at ZeRO stage $stage on the device (compared with the CPU below)"
    if [[ $model == llama && ! -f $BIN/../data/llama/config.json ]]; then
      echo "no Llama folder in the bundle (scripts/make_llama_folder.sh failed at build)" | tee "$gpu.log"
      echo 2 >"$gpu.status"; continue
    fi
    compare_arguments "$model" "$stage" "$gpu" || { echo 2 >"$gpu.status"; continue; }
    status=0
    "$BIN/zero" "${arguments[@]}" >"$gpu.log" 2>&1 || status=$?
    echo "$status" >"$gpu.status"
    cat "$gpu.log"
  done
}

# Each compared run's device losses against its CPU run's (waited for until STEP_DEADLINE, epoch
# seconds): both columns, the largest difference and a NOTE per run; 1 when any run failed on
# either side or left the tolerance.
compare_with_cpu() {
  local run model stage failed=0 gpu cpu attention
  for run in $COMPARE_RUNS; do
    model=${run%%:*} stage=${run#*:} gpu=$WORK/gpu_${model}_s$stage cpu=$CPU_REFS/cpu_${model}_s$stage
    if [[ $(cat "$gpu.status" 2>/dev/null) != 0 ]]; then
      echo "NOTE: $model stage $stage: zero train on the device failed ($(tail -n 1 "$gpu.log" 2>/dev/null))"
      failed=$((failed + 1)); continue
    fi
    while [[ ! -f $cpu.status && $(date +%s) -lt $STEP_DEADLINE ]]; do sleep 2; done
    if [[ ! -f $cpu.status ]]; then
      echo "NOTE: $model stage $stage: the CPU run had not finished by the step's deadline (at $(grep -a '^step ' "$cpu.log" 2>/dev/null | tail -n 1 | cut -d'|' -f1))"
      failed=$((failed + 1)); continue
    fi
    if [[ $(cat "$cpu.status") != 0 ]]; then
      echo "---- $model stage $stage: the CPU run's log"
      cat "$cpu.log"
      echo "NOTE: $model stage $stage: zero train on the CPU failed (exit $(cat "$cpu.status"))"
      failed=$((failed + 1)); continue
    fi
    losses_of "$cpu/metrics.jsonl" >"$cpu.losses" || true
    losses_of "$gpu/metrics.jsonl" >"$gpu.losses" || true
    attention=$(grep -aom1 'attention on .*' "$gpu.log" | sed 's/^attention on //')
    attention=${attention:-not reported}
    compare_losses "$cpu.losses" "$gpu.losses" "$(compare_tolerance "$model")" \
      "$model stage $stage, device attention ${attention%% (*}" || failed=$((failed + 1))
  done
  [[ $failed -eq 0 ]]
}

# zero train on the device against the CPU (above), then the speed runs (below).
step_train() {
  [[ $GPU_COUNT -gt 0 || -n "${ZERO_GPU_CHECK_TRAIN_ON_CPU:-}" ]] || { echo "SKIPPED: no CUDA device"; return 0; }
  [[ -f $BIN/../data/input.txt ]] ||
    { echo "NOTE: no data in the bundle (../shared/data was absent when it was built)"; return 1; }
  local failed=0
  WORK=$(mktemp -d)
  export WORK
  device_compare_runs
  speed_runs || failed=$((failed + 1))
  compare_with_cpu || failed=$((failed + 1))
  rm -rf "$WORK"
  [[ $failed -eq 0 ]]
}

# The speed runs: GPT-2 124M from scratch on tiny shakespeare with the GPT-2 tokenizer,
# B 16, T 1024, bf16, AdamW, ZeRO stages 0 and 3 at world 1. For each stage: the plan
# (--dry_run), the run with the device's memory sampled by nvidia-smi, and a NOTE with tokens/s
# (the median of the logged intervals after the first), MFU as benchmarks/gpt2_gpu_torch.py
# computes it, the loss, the ledger's peak, nvidia-smi's peak and the plan's train phase.
# ZERO_GPU_CHECK_TRAIN_SHAPE (config_overrides), _BATCH, _BLOCK and _STEPS shrink it for a try on
# a CPU (ZERO_GPU_CHECK_TRAIN_ON_CPU=1); ZERO_GPU_CHECK_TRAIN_VARIANTS picks the runs (default
# "0 3 0:breakdown 0:tiled 3:offload"; empty: none; STAGE[:MODE], modes joined by + combine, as
# 3:offload+breakdown; 3:nvme puts the optimizer's states on NVMe, 3:nvme+params the parameters
# as well).
speed_runs() {
  local data=$BIN/../data
  # No dropout, as benchmarks/gpt2_gpu_torch.py (and llm.c) train it.
  local shape="attn_pdrop=0,resid_pdrop=0,embd_pdrop=0${ZERO_GPU_CHECK_TRAIN_SHAPE:+,$ZERO_GPU_CHECK_TRAIN_SHAPE}"
  local batch=${ZERO_GPU_CHECK_TRAIN_BATCH:-16}
  local block=${ZERO_GPU_CHECK_TRAIN_BLOCK:-1024} steps=${ZERO_GPU_CHECK_TRAIN_STEPS:-20}
  local work stage failed=0 sampler variant mode generated=""
  work=$(mktemp -d)
  # Stages 0 and 3 as users run them; then stage 0 with DeepSpeed's wall_clock_breakdown and
  # ZERO_KERNEL_PROFILE (where a step's time goes: the table is in the log), stage 0 with the
  # tiled fp32 attention instead of cuDNN's (ZERO_ATTENTION), and stage 3 with ZeRO-Offload
  # (optimizer and parameters in pinned host memory). 3:nvme (the optimizer's states on NVMe, ~1
  # minute, bound by the disk) only when asked for.
  local variants
  read -ra variants <<<"${ZERO_GPU_CHECK_TRAIN_VARIANTS-0 3 0:breakdown 0:tiled 3:offload}"
  for variant in "${variants[@]}"; do
    stage=${variant%%:*}
    mode=${variant#"$stage"}
    mode=${mode#:}
    echo "==== zero train, ZeRO stage $stage${mode:+ ($mode)}"
    local offload=""
    case "$mode" in
      *offload*) offload=', "offload_optimizer": {"device": "cpu", "pin_memory": true}, "offload_param": {"device": "cpu", "pin_memory": true}' ;;
      *nvme*) mkdir -p "$work/nvme"
            offload=', "offload_optimizer": {"device": "nvme", "nvme_path": "'"$work/nvme"'", "pin_memory": true}'
            # nvme+params: the parameters past max_in_cpu (0: all) in swap regions too, read
            # ahead and waited for on the copy stream (a CUDA host function).
            [[ $mode == *params* ]] &&
              offload+=', "offload_param": {"device": "nvme", "nvme_path": "'"$work/nvme"'", "pin_memory": true, "max_in_cpu": 0}' ;;
    esac
    printf '{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "bf16": {"enabled": true}, "wall_clock_breakdown": %s, "zero_optimization": {"stage": %d%s}}\n' \
      "$([[ $mode == *breakdown* ]] && echo true || echo false)" "$stage" "$offload" >"$work/ds$stage.json"
    local attention=${ZERO_ATTENTION:-auto}
    [[ $mode == *tiled* ]] && attention=tiled
    local args=(train --model_type gpt2 --config_overrides "$shape" --tokenizer_name "$data/gpt2"
                --train_file "$data/input.txt" --do_train True --block_size "$block"
                --per_device_train_batch_size "$batch" --max_steps "$steps" --learning_rate 6e-4
                --warmup_steps 5 --weight_decay 0.1 --logging_steps 5 --include_tokens_per_second True
                --bf16 True --seed 42 --save_strategy no --deepspeed "$work/ds$stage.json"
                --output_dir "$work/out$stage" --overwrite_output_dir True)
    "$BIN/zero" "${args[@]}" --dry_run True >"$work/plan$stage.log" 2>&1 || { cat "$work/plan$stage.log"; failed=$((failed + 1)); continue; }
    cat "$work/plan$stage.log"
    sampler=""
    if [[ $GPU_COUNT -gt 0 ]]; then
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$work/memory$stage" 2>/dev/null &
      sampler=$!
    fi
    local status=0
    local profile=0
    [[ $mode == *breakdown* ]] && profile=1
    ZERO_ATTENTION=$attention ZERO_KERNEL_PROFILE=$profile "$BIN/zero" "${args[@]}" >"$work/train$stage.log" 2>&1 || status=$?
    [[ -n "$sampler" ]] && { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }
    cat "$work/train$stage.log"
    if [[ $status -ne 0 ]]; then
      echo "NOTE: stage $stage: zero train failed (exit $status)"
      failed=$((failed + 1))
      continue
    fi
    local params tokens_per_s loss first_loss ledger smi plan layers width
    params=$(grep -aom1 '[0-9.]*M parameters' "$work/train$stage.log" | sed 's/M parameters//')
    layers=$(grep -aom1 '[0-9]* layers' "$work/train$stage.log" | sed 's/ layers//')
    width=$(grep -aom1 'width [0-9]*' "$work/train$stage.log" | sed 's/width //')
    tokens_per_s=$(grep -a '^step ' "$work/train$stage.log" | tail -n +2 | grep -ao '[0-9.]* tokens/s' |
                   sed 's/ tokens.s//' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print 0}')
    first_loss=$(grep -a '^step ' "$work/train$stage.log" | head -n 1 | grep -ao 'loss [0-9.]*' | head -n 1)
    loss=$(grep -a '^step ' "$work/train$stage.log" | tail -n 1 | grep -ao 'loss [0-9.]*' | head -n 1)
    ledger=$(grep -a '^step ' "$work/train$stage.log" | tail -n 1 | grep -ao 'memory peak MiB per rank [0-9.]*' | sed 's/.* //')
    smi=$(sort -n "$work/memory$stage" 2>/dev/null | tail -n 1)
    plan=$(grep -a '^    train ' "$work/plan$stage.log" | grep -ao 'device [0-9.]* [GM]iB' | head -n 1)
    local mfu
    mfu=$(awk -v p="$params" -v l="$layers" -v c="$width" -v t="$block" -v r="$tokens_per_s" \
          'BEGIN {printf "%.3f", (6 * p * 1e6 + 12 * l * c * t) * r / 989e12}')
    local attention_line breakdown=""
    attention_line=$(grep -aom1 'GPT-2 attention on .*' "$work/train$stage.log" | sed 's/GPT-2 attention on //')
    [[ $mode == *breakdown* ]] &&
      breakdown=", $(grep -a '^time (ms) per step' "$work/train$stage.log" | tail -n 1 | sed 's/^time (ms) per step | //'), $(grep -aom1 'kernel profile (ZERO_KERNEL_PROFILE): .*' "$work/train$stage.log" | sed 's/^kernel profile (ZERO_KERNEL_PROFILE): //')"
    echo "NOTE: stage $stage${mode:+ ($mode)}: ${tokens_per_s} tokens/s, MFU ${mfu} (989 TFLOP/s peak), ${first_loss} -> ${loss#loss }, ledger peak ${ledger:-?} MiB, nvidia-smi peak ${smi:-?} MiB, plan train ${plan:-?}, attention: ${attention_line:-?}${breakdown}"
    [[ -n "$generated" ]] || generate_from "$work/out$stage" || failed=$((failed + 1))
    generated=1
  done
  rm -rf "$work"
  [[ $failed -eq 0 ]]
}

# zero generate on the device from the first trained model: 32 new tokens after a prompt, fp32 and
# bf16 (the parameters copied to the device once, each token's logits read back); the ids and
# the time in a NOTE.
generate_from() {
  local model=$1 dtype ids start seconds flags
  for dtype in fp32 bf16; do
    flags=()
    [[ $dtype == bf16 ]] && flags=(--bf16)
    start=$(date +%s.%N)
    ids=$("$BIN/zero" generate --model "$model" --prompt_ids 464,3290,286,262 --max_new_tokens 32 \
            "${flags[@]}" 2>&1) || { echo "$ids"; echo "NOTE: zero generate ($dtype) failed"; return 1; }
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
    echo "$ids"
    echo "NOTE: zero generate ($dtype, 32 tokens, whole process): ${seconds} s, ids $(tail -n 1 <<<"$ids" | cut -c1-60)..."
  done
}

step_torch() {
  local python=python3
  [[ -x /opt/torch/.venv/bin/python3 ]] && python=/opt/torch/.venv/bin/python3
  if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "SKIPPED: no PyTorch with a CUDA device"
    return 0
  fi
  local output
  output=$(PYTHONUNBUFFERED=1 "$python" "$ROOT/benchmarks/gpt2_gpu_torch.py" --batch 16 \
             --seq 1024 --modes eager,compile --steps 10 2>&1) || { echo "$output"; return 1; }
  echo "$output"
  grep -a '^result ' <<<"$output" | sed 's/^result /NOTE: /; s/ params=[0-9]*//'
}

run() {
  local bundle="" from_build="" steps=() budget=540 run_start
  run_start=$(date +%s)
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --budget)
        budget=${2:?--budget needs seconds}
        [[ $budget =~ ^[0-9]+$ && $budget -gt 0 ]] || die "run: --budget takes whole seconds above 0, not '$budget'"
        shift 2 ;;
      --bundle) bundle=${2:?--bundle needs a file}; shift 2 ;;
      --from-build) from_build=${2:?--from-build needs a build folder}; shift 2 ;;
      --results) results=${2:?--results needs a folder}; shift 2 ;;
      -h|--help) usage 0 ;;
      -*) die "run: unknown option '$1' (see --help)" ;;
      *)
        [[ " ${all_steps[*]} " == *" $1 "* ]] || die "run: unknown step '$1' (steps: ${all_steps[*]})"
        steps+=("$1"); shift ;;
    esac
  done
  [[ ${#steps[@]} -gt 0 ]] || steps=("${all_steps[@]}")
  [[ -z "$bundle" || -z "$from_build" ]] || die "run: --bundle and --from-build exclude each other"
  [[ -n "$bundle" || -n "$from_build" ]] || bundle=$root/.device/gpu_bundle.tar.xz
  stop_if_parse_only

  gpu_count=0
  if command -v nvidia-smi >/dev/null; then
    gpu_count=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c . || true)
  fi
  local device="cpu"
  [[ $gpu_count -gt 0 ]] && device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr -c 'A-Za-z0-9\n' '_' | sed 's/_*$//')
  results=${results:-$root/benchmarks/results/gpu_check_$(date -u +%Y%m%d_%H%M)_$device}
  mkdir -p "$results"
  summary=$results/summary.md

  if [[ -n "$bundle" ]]; then
    [[ -f "$bundle" ]] || die "run: no bundle at '$bundle' (make it here with: scripts/gpu_check.sh build)"
    local unpacked
    unpacked=$(mktemp -d)
    tar -C "$unpacked" -xJf "$bundle"
    bin=$unpacked/bundle/bin
  else
    # A build tree: wrapper folder of links to its executables.
    [[ -d $from_build ]] || die "run: no build folder at '$from_build'"
    from_build=$(cd "$from_build" && pwd)
    bin=$(mktemp -d)
    local program path
    for program in "${programs[@]}"; do
      path=$(find "$from_build" -type f -name "$program" -perm -u+x | head -n 1)
      [[ -n "$path" ]] && ln -s "$path" "$bin/$program"
    done
  fi
  local library_path
  library_path=$(cuda_library_path)
  export LD_LIBRARY_PATH="${library_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export BIN=$bin GPU_COUNT=$gpu_count ROOT=$root KERNEL_TESTS="${kernel_tests[*]}" CUDA_TESTS="${cuda_tests[*]}" RESULTS=$results
  export REQUIRED_CASES="${required_cases[*]}" COMPARE_RUNS=${ZERO_GPU_CHECK_COMPARE:-gpt2:0 gpt2:3 llama:0 llama:3}
  local cores
  cores=$(nproc)
  export CPU_THREADS=${ZERO_GPU_CHECK_CPU_THREADS:-$(( cores > 1 ? cores / 2 : 1 ))} CPU_REFS
  CPU_REFS=$(mktemp -d)
  export -f step_env step_tests sanitize step_memcheck step_racecheck step_kernels step_train generate_from step_torch \
    find_compute_sanitizer losses_of compare_losses gtest_listed_cases check_cases measured_bounds \
    compare_arguments compare_tolerance device_compare_runs compare_with_cpu speed_runs

  local plan
  plan=$(plan_steps "$budget" "${steps[@]}")
  {
    echo "# gpu_check $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
    echo
    echo "- device: $([[ $gpu_count -gt 0 ]] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1 || echo 'no CUDA device visible')"
    echo "- programs: ${bundle:-$from_build}"
    if [[ -f "$bin/../commit.txt" ]]; then
      echo "- commit: $(cat "$bin/../commit.txt") (the bundle's build)"
    else
      echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    fi
    echo "- $(head -n 1 <<<"$plan" | sed 's/^gpu_check.sh: //')"
    echo
    echo "| step | status | seconds | notes |"
    echo "|---|---|---|---|"
  } >"$summary"
  [[ $gpu_count -gt 0 ]] || echo "gpu_check.sh: no CUDA device visible: the GPU steps say so and pass; CPU-side steps only"
  echo "$plan"
  # The train step's CPU runs, in the background from now on (the steps before it leave the CPU
  # idle); stopped when the steps end.
  local references=""
  if [[ " ${steps[*]} " == *" train "* && -f $bin/../data/input.txt ]] &&
     [[ $gpu_count -gt 0 || -n "${ZERO_GPU_CHECK_TRAIN_ON_CPU:-}" ]]; then
    cpu_references >/dev/null 2>&1 &
    references=$!
    echo "gpu_check.sh: the train step's CPU runs started in the background ($COMPARE_RUNS, $CPU_THREADS threads)"
  fi
  local name left limit estimate
  for name in "${steps[@]}"; do
    left=$(( budget - ($(date +%s) - run_start) ))
    estimate=$(step_estimate "$name")
    limit=$(step_limit "$name")
    if [[ $left -lt $estimate ]]; then
      record "$name" "failed: not run, ${left} s of the ${budget} s budget left (estimate ${estimate} s)" 0 ""
      continue
    fi
    [[ $limit -le $left ]] || limit=$left
    step "$name" "$limit" "step_$name"
  done
  if [[ -n $references ]]; then
    kill "$references" 2>/dev/null || true
    wait "$references" 2>/dev/null || true
  fi
  rm -rf "$CPU_REFS"
  echo "gpu_check.sh: $(( $(date +%s) - run_start )) s of the ${budget} s budget; summary in $summary"
  cat "$summary"
  [[ $failures -eq 0 ]]
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  selftest)
    # shellcheck source=scripts/gpu_check_selftest.sh
    source "$root/scripts/gpu_check_selftest.sh"
    selftest ;;
  -h|--help|"") usage 0 ;;
  *) die "unknown command '$1': build, run or selftest (see --help)" ;;
esac
