#!/usr/bin/env bash
# Runs the README's "install and consume" commands (install_and_consume.sh; the README holds a copy
# that the readme_examples test compares) in a scratch folder WORK where build/ is this build and
# tests/ the checkout's: installs zero into WORK/build-install, then configures, builds and runs
# the consumer project (tests/package/consumer: find_package(zero)) against it. Then, as a user on
# another machine would (docs/packaging.md):
#  1. moves the install tree elsewhere and checks its CMake files name no path of this machine;
#  2. consumes the moved tree with the CUDA toolkit hidden (CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit,
#     no CUDA folder on PATH or LD_LIBRARY_PATH): the CPU programs configure, build and run, and
#     neither they nor a library they load is a CUDA library (readelf, ldd);
#     An unknown component is refused, naming it.
#  3. in a CUDA build, asks for COMPONENTS cuda: refused while the toolkit is hidden (naming
#     CUDAToolkit), and otherwise a program linking zero::cuda has the CUDA backend registered.
set -euo pipefail
build_dir=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
ln -s "$(cd "$build_dir" && pwd)" "$work/build"
ln -s "$(cd "$source_dir" && pwd)/tests" "$work/tests"
export CMAKE_GENERATOR=Ninja
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=ccache
cd "$work" && bash -euo pipefail "$source_dir/tests/package/install_and_consume.sh" | grep -v '^-- '
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Relocation: the tree at another path (the original one gone), no path of this machine in it.
mkdir -p moved && mv build-install moved/zero-prefix
prefix=$work/moved/zero-prefix
# An absolute path opening a string, a list item or a generator expression's argument.
if grep -rnE "$work/build-install|(^|[\";:])/[A-Za-z]|/usr/local/cuda" "$prefix/lib/cmake/zero"; then
  fail "the package names a path of the build machine (above); it must name imported targets"
fi
echo "relocated: $prefix has no path of the build machine"

# 2. The CUDA toolkit hidden: no CUDA folder on PATH or LD_LIBRARY_PATH, CUDAToolkit not findable.
without_cuda() { printf %s "${1-}" | tr : "\n" | { grep -v -i cuda || true; } | paste -sd: -; }
hidden=(env -u CUDA_PATH -u CUDA_HOME -u CUDAToolkit_ROOT -u CUDACXX -u NCCL_ROOT
        PATH="$(without_cuda "$PATH")" LD_LIBRARY_PATH="$(without_cuda "${LD_LIBRARY_PATH-}")")
"${hidden[@]}" cmake -S tests/package/consumer -B build-cpu -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCMAKE_DISABLE_FIND_PACKAGE_NCCL=ON \
  --no-warn-unused-cli >/dev/null
"${hidden[@]}" cmake --build build-cpu >/dev/null
for program in consumer consumer_mlp; do
  needed=$(readelf -d "build-cpu/$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ' -)
  ! grep -qiE 'cuda|nccl|cublas|cudnn' <<<"$needed" || fail "$program needs a CUDA library: $needed"
  ! ldd "build-cpu/$program" | grep -iE 'cuda|nccl|cublas|cudnn' ||
    fail "$program loads a CUDA library (above)"
  echo "cpu $program: $(stat -c %s "build-cpu/$program") bytes," \
       "$(strip -o "build-cpu/$program.stripped" "build-cpu/$program" &&
          stat -c %s "build-cpu/$program.stripped") stripped; needs $needed"
done
"${hidden[@]}" build-cpu/consumer | tee consumer.out
grep -q "^cuda backend: absent (.*link zero::cuda" consumer.out ||
  fail "consumer: expected no CUDA backend and an error naming zero::cuda"
"${hidden[@]}" build-cpu/consumer_mlp >consumer_mlp.out || fail "consumer_mlp failed"
echo "cpu consumer_mlp ran: $(grep -c . consumer_mlp.out) lines"

if "${hidden[@]}" cmake -S tests/package/consumer -B build-bogus -DCONSUMER_COMPONENTS=bogus \
     -DCMAKE_PREFIX_PATH="$prefix" >bogus.out 2>&1; then
  fail "COMPONENTS bogus configured"
fi
grep -q "no component 'bogus'" bogus.out || fail "COMPONENTS bogus: the error does not name it"
echo "unknown component: refused, naming it"

# 3. The cuda component (only a CUDA build has it).
if [[ ! -f $prefix/lib/cmake/zero/zeroCudaTargets.cmake ]]; then
  echo "cuda component: not in this build (ZERO_WITH_CUDA off), not checked"
  exit 0
fi
if "${hidden[@]}" cmake -S tests/package/consumer -B build-cuda-hidden -DCONSUMER_WITH_CUDA=ON \
     -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
     >cuda-hidden.out 2>&1; then
  fail "COMPONENTS cuda configured with the CUDA toolkit hidden"
fi
grep -q CUDAToolkit cuda-hidden.out || fail "COMPONENTS cuda without the toolkit: no CUDAToolkit in the error"
echo "cuda component without the toolkit: refused, naming CUDAToolkit"
cmake -S tests/package/consumer -B build-cuda -DCMAKE_PREFIX_PATH="$prefix" \
  -DCONSUMER_WITH_CUDA=ON >/dev/null
cmake --build build-cuda >/dev/null
readelf -d build-cuda/consumer_cuda | grep -q 'NEEDED.*libcudart' ||
  fail "consumer_cuda links zero::cuda but does not need libcudart"
build-cuda/consumer_cuda | tee consumer_cuda.out
grep -q "^cuda backend: linked" consumer_cuda.out ||
  fail "consumer_cuda links zero::cuda but the CUDA backend is not registered"
