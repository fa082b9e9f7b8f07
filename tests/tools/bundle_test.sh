#!/usr/bin/env bash
# scripts/bundle.sh end to end: bundles the zero command and a test executable, then checks in an
# empty environment (env -i) that the wrappers run them, that the loader resolves every library
# inside the bundle except glibc, the NVIDIA driver and what was left out on purpose, that the
# bundled mpirun runs zero on 2 ranks loading no Open MPI/PMIx file from outside the bundle, and
# that bad input is refused.
#   bundle_test.sh SOURCE_DIR ZERO TEST_EXECUTABLE
set -euo pipefail
source_dir=$1 zero=$2 test_executable=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# NCCL (218 MB), cuBLASLt (540 MB) and cuDNN are left out to keep the test fast: the copy is the
# same code path as any library.
"$source_dir/scripts/bundle.sh" --output "$work/bundle" --exclude '^lib(nccl|cublasLt|cudnn)' "$zero" "$test_executable"
bundle=$work/bundle
test_name=$(basename "$test_executable")
glibc='^(linux-vdso\.so\.1|ld-linux[-a-z0-9_]*\.so\.[0-9]+|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libutil\.so\.1|libresolv\.so\.2|libmvec\.so\.1)$'
left_out=$(sed -n 's/^left_out \([^ ]*\) .*/\1/p' "$bundle/MANIFEST" | paste -sd'|')

# 1. The loader's view through each wrapper.
programs=(zero "$test_name")
[[ -x "$bundle/bin/mpirun" ]] && programs+=(mpirun)  # builds with Open MPI
for program in "${programs[@]}"; do
  listing=$(env -i ZERO_BUNDLE_LDD=1 "$bundle/bin/$program")
  [[ -n "$listing" ]] || fail "$program: ZERO_BUNDLE_LDD printed nothing"
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" ]] || { name=$(basename "$name"); path=""; }
    [[ "$name" =~ $glibc ]] && continue
    [[ -n "$left_out" && "$name" =~ ^($left_out)$ ]] && continue
    [[ "$path" == "$bundle/lib/"* ]] || fail "$program loads $name from '${path:-?}', not from the bundle"
  done <<<"$listing"
done
echo "loader: every library from the bundle (or glibc / left out: ${left_out:-none})"

# 2. The programs run with nothing from this environment.
env -i "$bundle/bin/zero" --version | grep -Eq '^zero [0-9]+\.[0-9]+\.[0-9]+' || fail "zero --version"
env -i "$bundle/bin/$test_name" --gtest_brief=1 >"$work/test.log" 2>&1 ||
  { cat "$work/test.log"; fail "$test_name failed from the bundle"; }
echo "run: zero --version and $test_name pass from the bundle"

# 3. The bundled mpirun (builds with Open MPI): 2 ranks, every file the loader opens (dlopen
# included) from the bundle. zero env dlopens cuBLASLt and cuDNN by name only to print their
# versions: they may come from this machine.
if [[ -x "$bundle/bin/mpirun" ]]; then
  # Open MPI's settings from the test's environment (ctest's ZERO_MPI_TEST_ENV: transports that
  # work in containers) pass through; nothing else does.
  mapfile -t mpi_settings < <(env | grep -E '^OMPI_(MCA_|ALLOW_)' || true)
  env -i PATH=/usr/bin:/bin HOME="$work" "${mpi_settings[@]}" LD_DEBUG=files LD_DEBUG_OUTPUT="$work/loader" \
    "$bundle/bin/mpirun" --allow-run-as-root --oversubscribe -np 2 "$bundle/bin/zero" env --check_comm \
    >"$work/mpi.log" 2>&1 || { cat "$work/mpi.log"; fail "mpirun from the bundle"; }
  [[ $(grep -c 'all_reduce(sum of rank+1) = 3 (expected 3)' "$work/mpi.log") == 2 ]] ||
    { cat "$work/mpi.log"; fail "2 ranks did not all-reduce"; }
  outside=$(cat "$work"/loader.* | grep -o 'file=/[^ ]*' | sed 's/^file=//' | sort -u |
    grep -v "^$bundle/" | grep -Ev '/(libcublasLt|libcudnn[_a-z]*)\.so' || true)
  if [[ -n "$left_out" ]]; then
    outside=$(printf '%s\n' "$outside" | grep -Ev "/($left_out)\$" || true)
  fi
  [[ -z "$outside" ]] || fail "mpirun and its ranks loaded files from outside the bundle: $outside"
  echo "mpirun: 2 ranks, no Open MPI or PMIx file from outside the bundle"
fi

# 4. --with-glibc: glibc from the bundle too, run through the bundled loader.
"$source_dir/scripts/bundle.sh" --output "$work/glibc" --with-glibc --exclude '^libnccl' "$zero" >/dev/null
env -i "$work/glibc/bin/zero" --version | grep -Eq '^zero [0-9]' || fail "zero --version (--with-glibc)"
while read -r name arrow path _; do
  [[ "$arrow" == "=>" ]] || continue
  [[ "$name" =~ ^libnccl ]] && continue
  [[ "$path" == "$work/glibc/lib/"* ]] || fail "--with-glibc: $name from '$path', not from the bundle"
done < <(env -i ZERO_BUNDLE_LDD=1 "$work/glibc/bin/zero")
echo "with-glibc: libc and every other library from the bundle"

# 5. Bad input.
if "$source_dir/scripts/bundle.sh" --output "$bundle" "$zero" 2>"$work/error"; then
  fail "a non-empty output folder was accepted"
fi
grep -q "exists and is not empty" "$work/error" || fail "non-empty output: $(cat "$work/error")"
if "$source_dir/scripts/bundle.sh" --output "$work/other" "$bundle/MANIFEST" 2>"$work/error"; then
  fail "a non-executable was accepted"
fi
grep -q "is not an executable file" "$work/error" || fail "non-executable: $(cat "$work/error")"
echo "bundle test passed"
