#!/usr/bin/env bash
# Sanitizer builds and the tests each runs (docs/reliability.md "Sanitizers"), with GCC:
#   scripts/sanitize.sh asan   AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer (no
#                              recovery) into build-asan/: the unit tests of the readers, core,
#                              communicators, checkpoints and NVMe swap, the CUDA kernel bodies
#                              run by the kernel emulator, the fuzz corpora, and the trainer at
#                              worlds 1, 2, 4 in threads and 2 under mpirun
#   scripts/sanitize.sh tsan   ThreadSanitizer into build-tsan/: the stream, communicator, TCPStore,
#                              NVMe swap and watchdog tests and the trainer (as in asan), one
#                              OpenMP thread (cmake/ZeroSanitizers.cmake)
#   scripts/sanitize.sh all    both, one after the other
# Only the subset's targets are built (no CUDA, benchmarks, Python module or `zero` command line
# program): the subset is what fits CI's time
# (docs/reliability.md). Environment: JOBS build jobs (nproc), ZERO_SANITIZE_BUILD_PREFIX (build-:
# build-asan/, build-tsan/). Prints ctest's output; its last line is "sanitize.sh KIND: N passed,
# M failed, K skipped"; the exit status is 1 on a failure. Under CI=true nothing of the subset may
# drop out: a target this configuration did not make fails the run before the build, a listed test
# that did not run fails it, and so does a skipped test unless allowed_skips below names it with
# the reason it gave. Elsewhere those are printed and the run goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh asan|tsan|all}
if [ "$kind" = all ]; then
  status=0
  "$0" asan || status=1
  "$0" tsan || status=1
  exit "$status"
fi
source_dir=$(pwd)
build=${ZERO_SANITIZE_BUILD_PREFIX:-build-}$kind
# Every report goes to a file here (log_path), so a report fails the run even in a test that
# passes on its output (PASS_REGULAR_EXPRESSION) or whose process the sanitizer did not end.
reports=$source_dir/$build/sanitizer-reports
suppressions=$source_dir/tests/sanitizers
ci=false
[ "${CI:-}" = true ] && ci=true
# The skips CI accepts: test name -> the reason it must give (an extended regex over each skipped
# case's "zero: skipped SUITE.CASE: REASON" line, tests/common/skip_status.h). Any other skip, or
# another reason, fails the run under CI.
declare -A allowed_skips=(
  # ../shared/data (GPT-2's BPE files, tiny shakespeare, the real DeepSpeed configs) lives beside
  # the checkout on the development machines only; a clean clone has none (scripts/test.sh allows
  # the same reason in the normal build).
  [tokenizer_test]='shared data .* not present'
  [pipeline_test]='shared data .* not present'
  [real_configs_test]='shared data .* not present'
)
# libzero's core (tests/core: one program per source concept), under both sanitizers.
core_tests=(dtype_test memory_ledger_test flat_buffer_test stream_test suggest_test launch_test
            device_context_test abort_hooks_test logging_test)
# zero::train end to end on tiny GPT-2s (tests/train), each checking its losses against another
# path's: trainer_test's own cases (trainer_test_sanitizer: every stage at worlds 1, 2 and 4 in
# threads, checkpointing, streaming, a saved checkpoint, bad input), trainer_device_test (the CPU
# backend's asynchronous streams at worlds 1, 2 and 4), trainer_thread_comm_test (ZeRO-1/2/3 at
# worlds 2 and 4 through the thread communicator's stream-ordered collectives, against a plain
# host reference communicator, with stressed streams), and at world 2 under mpirun
# trainer_mpi_test (against world 1) and mpi_communicator_test (every collective against the
# serial reference; its communicator outlives MPI_Finalize).
trainer_tests=(trainer_test_sanitizer trainer_device_test trainer_thread_comm_test
               trainer_mpi_test_np2 mpi_communicator_test_np2)
trainer_targets=(trainer_test trainer_device_test trainer_thread_comm_test trainer_mpi_test
                 mpi_communicator_test)
case $kind in
asan)
  sanitize=address,undefined
  harnesses=(safetensors ds_config checkpoint tcp_store tokenizer_files tokenizer_json text_data)
  tests=("${core_tests[@]}" thread_communicator_test host_collectives_test tcp_store_test
         tcp_store_golden_test
         batch_test alias_test parse_test auto_test real_configs_test config_fuzz_test
         tokenizer_test text_files_test pipeline_test sampler_test
         checkpoint_index_test durable_write_test checkpoint_validation_test resharding_load_test
         checkpoint_save_test checkpoint_folders_test nvme_swap_store_test nvme_swap_faults_test
         engine_parity_test engine_offload_state_test)
  # The CUDA kernel bodies on the CPU (tests/common/kernel_emulator.h): each block's shared memory
  # is an allocation of exactly the launch's bytes, so an index past it is a heap overflow here.
  tests+=(kernel_emulator_test core_cuda_emulation_test optim_cuda_body_emulation_test
          gpt2_cuda_emulation_test gpt2_cuda_attention_emulation_test llama_cuda_emulation_test)
  targets=("${tests[@]}")
  for h in "${harnesses[@]}"; do tests+=("fuzz_replay_$h"); targets+=("${h}_fuzz"); done
  tests+=("${trainer_tests[@]}")
  targets+=("${trainer_targets[@]}")
  # A finding ends the test: ASan and UBSan abort (exit != 0) at the first report; the leak
  # check runs at exit. LeakSanitizer suppressions: third-party libraries only, each with its
  # reason (tests/sanitizers/lsan.supp).
  # Two cases cannot run under ASan, which reserves terabytes of shadow memory and makes mlock a
  # no-op: the TCPStore server under a 256 MiB address-space limit (RLIMIT_AS: ASan's own mmap
  # fails) and the CPU backend's pinned memory counted in VmLck. They run in the normal build.
  export GTEST_FILTER=-TcpStoreServer.AStringSizeWithoutItsBytesAllocatesNothing:EngineOffload.PinnedSpaceIsPageLockedOnTheCpuBackend
  export ASAN_OPTIONS=log_path=$reports/asan:abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1
  export UBSAN_OPTIONS=log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1
  export LSAN_OPTIONS=log_path=$reports/lsan:suppressions=$suppressions/lsan.supp:print_suppressions=0
  ;;
tsan)
  sanitize=thread
  tests=("${core_tests[@]}" thread_communicator_test host_collectives_test tcp_store_test
         tcp_store_golden_test
         nvme_swap_store_test nvme_swap_faults_test)
  targets=("${tests[@]}")
  # The watchdog over Gloo (a rank that skips a collective, calls another, is killed) at 2 ranks.
  tests+=(comm_gloo_watchdog_skip_np2 comm_gloo_watchdog_mismatch_np2 comm_gloo_watchdog_kill_np2)
  targets+=(comm_gloo_watchdog_main launch_ranks)
  # The trainer (trainer_tests above): rank threads, stream workers and OpenMPI's threads, with
  # one OpenMP thread as every test here. OpenMPI's uninstrumented copies into receive buffers
  # and its TCP transport's lock order are suppressed by name (tests/sanitizers/tsan.supp).
  tests+=("${trainer_tests[@]}")
  targets+=("${trainer_targets[@]}")
  # The TCPStore server case under a 256 MiB address-space limit cannot run under TSan either
  # (its shadow memory); it runs in the normal build and under the fuzz build's ASan.
  export GTEST_FILTER=-TcpStoreServer.AStringSizeWithoutItsBytesAllocatesNothing
  export TSAN_OPTIONS="log_path=$reports/tsan halt_on_error=1 second_deadlock_stack=1 suppressions=$suppressions/tsan.supp"
  ;;
*)
  echo "scripts/sanitize.sh: unknown kind '$kind' (asan, tsan or all)" >&2
  exit 2
  ;;
esac
rm -rf "$reports" && mkdir -p "$reports"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZERO_SANITIZE=$sanitize \
  -DZERO_WITH_CUDA=OFF -DZERO_BUILD_BENCHMARKS=OFF -DZERO_BUILD_PYTHON=OFF >/dev/null
# Targets the configuration did not make (no Gloo, no liburing) are left out with their tests;
# under CI that is an error, named before anything is built.
available=$(ninja -C "$build" -t targets all | sed -n 's/^\([A-Za-z0-9_]*\): phony$/\1/p')
build_targets=() missing_targets=()
for t in "${targets[@]}"; do
  if grep -qx "$t" <<<"$available"; then build_targets+=("$t"); else missing_targets+=("$t"); fi
done
if [ ${#missing_targets[@]} -gt 0 ]; then
  echo "sanitize.sh $kind: no target here for ${missing_targets[*]} (left out with their tests)"
  if $ci; then
    echo "sanitize.sh $kind: FAILED: under CI every target of the subset must build; configure the" \
         "sanitizer build with what it lacks (Gloo, liburing) or take the target out of the list" >&2
    exit 1
  fi
fi
nice -n 5 ninja -C "$build" -j "${JOBS:-$(nproc)}" "${build_targets[@]}"
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
log=$(mktemp)
junit=$(mktemp)
trap 'rm -f "$log" "$junit"' EXIT
status=0
ctest --test-dir "$build" -R "$regex" --output-on-failure -j "$(nproc)" --timeout 900 \
  --output-junit "$junit" 2>&1 | tee "$log" || status=$?
# Listed tests that did not run and skipped tests, with their reasons, against allowed_skips.
allowed=()
for name in "${!allowed_skips[@]}"; do allowed+=("$name=${allowed_skips[$name]}"); done
left_out=0
python3 "$source_dir/scripts/sanitize_skips.py" "$junit" "$kind" "$ci" "${tests[*]}" "${allowed[@]}" ||
  left_out=1 status=1
read -r failed total < <(sed -n 's/.* tests passed, \([0-9]*\) tests\? failed out of \([0-9]*\).*/\1 \2/p' "$log")
# ctest's "did not run" list, indented with a tab: "\t  4 - dtype_test (Skipped)".
skipped=$(grep -c '^[[:space:]]*[0-9]* - .* (Skipped)$' "$log" || true)
passed=$((${total:-0} - ${failed:-0} - skipped))
failed=$((${failed:-0} + left_out))  # tests left out or skipped unallowed: one failure
# The kernel emulator's fibers (ucontext; each switch annotated for ASan in
# tests/common/kernel_emulator.cc) make ASan warn once per process that it does not fully support
# swapcontext: a report holding that line alone is no finding.
for f in $(find "$reports" -type f); do
  grep -q -v "WARNING: ASan doesn't fully support makecontext/swapcontext" "$f" || rm -f "$f"
done
found=$(find "$reports" -type f | sort)
if [ -n "$found" ]; then
  echo "sanitize.sh $kind: sanitizer reports (a finding: fix it, or suppress a third-party library with its reason):"
  for f in $found; do sed 's/^/    /' "$f" | head -60; done
  failed=$((failed + 1)) status=1
fi
echo "sanitize.sh $kind: $passed passed, $failed failed, $skipped skipped"
[ "${total:-0}" -gt 0 ] || { echo "sanitize.sh $kind: no test ran" >&2; status=1; }
[ "$status" -eq 0 ] || exit 1
