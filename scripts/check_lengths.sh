#!/usr/bin/env bash
# The size limits a newcomer can rely on (ctest code_lengths): no source file over 600 lines
# outside tests/, no test file over 800, and no function over 120 lines, its lambdas counted in it
# (a function's span from Universal Ctags' line and end fields: lambdas lie inside their function's
# span). No allowlist. Every C++ and CUDA file the repository tracks is checked.
#   scripts/check_lengths.sh [SOURCE_DIR]   exit 0: within the limits; 1: each excess printed
set -euo pipefail
source_dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$source_dir"
max_source=600 max_test=800 max_function=120
command -v ctags >/dev/null || { echo "check_lengths: ctags not found (universal-ctags)" >&2; exit 2; }
ctags --version 2>/dev/null | grep -q 'Universal Ctags' ||
  { echo "check_lengths: ctags is not Universal Ctags (universal-ctags): no end lines" >&2; exit 2; }

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cu' '*.cuh' '*.cpp' '*.hpp')
else  # a source tree without git: every such file outside build folders
  mapfile -t files < <(find . \( -name 'build*' -o -name '.git' \) -prune -o -type f \
    \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.hpp' \) \
    -print | sed 's|^\./||' | sort)
fi
[[ ${#files[@]} -gt 0 ]] || { echo "check_lengths: no tracked C++ files under $source_dir" >&2; exit 2; }
failures=0
for file in "${files[@]}"; do
  lines=$(wc -l <"$file")
  limit=$max_source
  [[ "$file" == tests/* ]] && limit=$max_test
  if [[ $lines -gt $limit ]]; then
    echo "$file: $lines lines (at most $limit)"
    failures=$((failures + 1))
  fi
done

# Function spans: name, file, line, end. A function tag without an end field means ctags could not
# read its span: that fails the check rather than letting it pass unchecked.
tags=$(ctags --languages=C++ --langmap=C++:+.cu.cuh --kinds-C++=f --fields=+ne --extras=-F \
  --sort=no -f - "${files[@]}")
report=$(awk -F'\t' -v max="$max_function" '
  {
    line = ""; end = ""
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6)
      if ($i ~ /^end:/) end = substr($i, 5)
    }
    functions++
    name = ($1 ~ /^__anon/) ? "a lambda" : $1
    if (line == "" || end == "") { print $2 ": ctags gave no span for function " name; bad++; next }
    if (end - line + 1 > max) {
      print $2 ":" line ": " name " is " (end - line + 1) " lines (at most " max ")"; bad++
    }
  }
  END { print "functions " functions + 0 " " bad + 0 }' <<<"$tags")
read -r _ functions over < <(tail -n 1 <<<"$report")
sed '$d' <<<"$report"
failures=$((failures + over))
[[ $functions -gt 0 ]] || { echo "check_lengths: ctags found no functions" >&2; exit 2; }
if [[ $failures -gt 0 ]]; then
  echo "check_lengths: ${#files[@]} files, $functions functions: $failures over the limits"
  exit 1
fi
echo "check_lengths: ${#files[@]} files, $functions functions: within the limits (files $max_source, tests $max_test, functions $max_function lines)"
