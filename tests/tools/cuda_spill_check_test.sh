#!/usr/bin/env bash
# The build's register-spill check (cmake/ZeroWarnings.cmake: ptxas -warn-spills -Werror on every
# CUDA source) is live: a planted spilling kernel fails to compile with the project's flags and
# the error says so, the same kernel without a register cap compiles, `-Xptxas -v` prints
# readable register and spill counts, and every .cu file of the tree compiles in the build with
# the flags. A ptxas whose output changes fails this test rather than letting the check disappear.
#   cuda_spill_check_test.sh NVCC ARCH BUILD_NINJA SOURCE SOURCE_DIR CUDA_ON FLAGS...
# SOURCE_DIR: the tree whose .cu files (all but SOURCE) must compile with the flags; CUDA_ON: OFF
# when nvcc is present but the build leaves CUDA off (the ptxas checks still run).
set -euo pipefail
nvcc=$1 arch=$2 ninja_file=$3 source=$4 source_dir=$5 cuda_on=$6
shift 6
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

# ptxas -v's resource lines are readable: every kernel of the planted file reports its registers
# and its spill stores and loads (0 without a cap).
"$nvcc" -arch="sm_$arch" -cubin -Xptxas -v "$source" -o "$work/verbose.cubin" >"$work/verbose.log" 2>&1 ||
  { cat "$work/verbose.log"; fail "the planted kernel did not compile with -Xptxas -v"; }
grep -Eq 'Used [0-9]+ registers' "$work/verbose.log" ||
  { cat "$work/verbose.log"; fail "ptxas -v output names no register count: cannot read it"; }
grep -Eq '0 bytes spill stores, 0 bytes spill loads' "$work/verbose.log" ||
  { cat "$work/verbose.log"; fail "ptxas -v output names no spill counts: cannot read it"; }
echo "ptxas -v: $(grep -Eo 'Used [0-9]+ registers' "$work/verbose.log" | head -n 1), no spills"

if [[ $cuda_on != ON ]]; then
  echo "spill check: nvcc present, CUDA off in this build: no CUDA sources compiled"
  echo "spill check test passed"
  exit 0
fi
# Every CUDA object's compile in build.ninja carries the flags, and every .cu file of the tree
# (but the planted one) is compiled.
awk -v flag="${flags[0]}" '
  /^build / { in_cu = ($0 ~ /\.cu\.o:/); if (in_cu) { cu++; source = $4 } }
  in_cu && /^  FLAGS = / { print source, (index($0, flag) ? "ok" : "lacks") }' "$ninja_file" \
  | sort -u >"$work/compiles"
sources=$(wc -l <"$work/compiles")
[[ $sources -gt 0 ]] || fail "no CUDA source compiles found in $ninja_file"
if grep -q ' lacks$' "$work/compiles"; then
  fail "CUDA compiles lack ${flags[0]}: $(grep ' lacks$' "$work/compiles" | cut -d' ' -f1 | xargs)"
fi
planted=$(cd "$(dirname "$source")" && pwd)/$(basename "$source")
missing=()
while IFS= read -r file; do
  [[ $file == "$planted" ]] && continue
  grep -Fq "$file ok" "$work/compiles" || missing+=("$file")
done < <(cd "$source_dir" && find "$(pwd)" -name '*.cu' -not -path '*/build*' -not -path '*/.git/*' | sort)
[[ ${#missing[@]} -eq 0 ]] || fail "CUDA sources not compiled with the spill check: ${missing[*]}"
echo "spill check: $(wc -l <"$work/compiles") CUDA compiles (every .cu of the tree) with ${flags[*]}"
echo "spill check test passed"
