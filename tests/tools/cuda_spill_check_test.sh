#!/usr/bin/env bash
# The build's register-spill check (cmake/ZeroWarnings.cmake: ptxas -warn-spills -Werror on every
# CUDA source) is live: a planted spilling kernel fails to compile with the project's flags and
# the error says so, the same kernel without a register cap compiles, and every .cu compile in the
# build carries the flags. A ptxas whose output changes fails this test rather than letting the
# check disappear.
#   cuda_spill_check_test.sh NVCC ARCH BUILD_NINJA SOURCE FLAGS...
set -euo pipefail
nvcc=$1 arch=$2 ninja_file=$3 source=$4
shift 4
flags=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if "$nvcc" -arch="sm_$arch" -cubin -maxrregcount=24 "${flags[@]}" "$source" -o "$work/capped.cubin" \
     >"$work/capped.log" 2>&1; then
  cat "$work/capped.log"
  fail "the planted kernel spilled under a 24-register cap and still compiled with ${flags[*]}"
fi
grep -q 'Registers are spilled to local memory' "$work/capped.log" ||
  { cat "$work/capped.log"; fail "nvcc failed without naming the spill"; }
echo "planted spill refused: $(grep -o 'Registers are spilled[^,]*' "$work/capped.log" | head -n 1)"
"$nvcc" -arch="sm_$arch" -cubin "${flags[@]}" "$source" -o "$work/free.cubin" >"$work/free.log" 2>&1 ||
  { cat "$work/free.log"; fail "the planted kernel without a register cap did not compile"; }

# Every CUDA object's compile in build.ninja carries the flags.
read -r sources checked < <(awk -v flag="${flags[0]}" '
  /^build / { in_cu = ($0 ~ /\.cu\.o:/); if (in_cu) cu++ }
  in_cu && /^  FLAGS = / { if (index($0, flag)) ok++ }
  END { print cu + 0, ok + 0 }' "$ninja_file")
[[ $sources -gt 0 ]] || fail "no CUDA source compiles found in $ninja_file"
[[ $sources -eq $checked ]] || fail "$((sources - checked)) of $sources CUDA compiles lack ${flags[0]}"
echo "spill check: $sources CUDA sources compile with ${flags[*]}"
echo "spill check test passed"
