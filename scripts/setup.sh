#!/usr/bin/env bash
# Installs, idempotently, the Debian packages zero builds and tests with, then the golden tests'
# private Python venv (scripts/setup_venv.sh; ZERO_SETUP_VENV=0 skips it) and the Python module's
# build venv (below; ZERO_SETUP_PY_VENV=0 skips it).
# With --main-job (scripts/demo.sh): only the packages the main job builds and runs with (the
# compiler, the libraries `zero` links, MPI, the corpus, gnuplot), no venv: what the tests alone
# need (GoogleTest, Google Benchmark, Python, PyTorch, ...) waits for scripts/test.sh.
# Only installs what is missing; needs root (or sudo) only when something is missing.
# ZERO_PARSE_ONLY=1 (scripts/check_doc_commands.py): stops once the arguments are checked.
set -euo pipefail
cd "$(dirname "$0")/.."
main_job=0
case "$*" in
  "") ;;
  --main-job) main_job=1 ;;
  *) echo "setup.sh: unknown arguments '$*' (the one argument is --main-job)" >&2; exit 2 ;;
esac
[ "${ZERO_PARSE_ONLY:-0}" != 1 ] || { echo "scripts/setup.sh: the command line parses"; exit 0; }

# The main job's: every package that decides how `zero` is configured and built is here, so that
# scripts/test.sh's later build in the same folder recompiles none of it.
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  liburing-dev  # NVMe swap: io_uring, O_DIRECT (libzero/src/offload/)
  libopenmpi-dev openmpi-bin
  libgloo-dev  # the Gloo communicator (torchrun, srun without PMI)
  libeigen3-dev libopenblas-dev
  libdnnl-dev  # oneDNN: the GPT-2 bf16 GEMMs (AMX / AVX512-BF16 matmul)
  libboost-program-options-dev
  nlohmann-json3-dev
  libpcre2-dev
  libicu-dev  # NFC for tokenizer.json normalizers (model/text/)
  libflatbuffers-dev  # the Arrow IPC reader's flatbuffers runtime (model/text/src/arrow_stream.cc)
  fortunes  # the demo corpus: /usr/share/games/fortunes (scripts/demo.sh, `zero train`)
  gnuplot-nox  # `zero train`: output_dir/loss.svg (skipped with a warning without it)
)
# The tests' and the other tools'.
test_packages=(
  fio           # benchmarks/nvme_bench: the same I/O measured by fio, side by side
  iproute2     # `ip netns`: the two-host Gloo test (tests/comm/two_host_netns.sh)
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv python3-numpy python3-regex  # python3-regex: tests/golden/gpt2_tokenizer_reference.py
  python3-dev  # the Python module (bindings/python): Python.h
  universal-ctags  # scripts/check_lengths.sh (ctest code_lengths): function spans
)
if [ "$main_job" = 0 ]; then
  packages+=("${test_packages[@]}")
  if [ "${ZERO_SETUP_TORCH:-1}" = 1 ]; then packages+=(python3-torch); fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# The Python module's build venv, ${ZERO_PY_VENV:-$HOME/.cache/zero/py-venv}: Debian's python3
# (whose python3-dev the module compiles against) with its numpy (--system-site-packages), plus
# nanobind and scikit-build-core (the build, bindings/python/find_nanobind.cmake finds it) and
# pytest (scripts/test.sh runs bindings/python/tests with it). Versions pinned. A few seconds when
# it is there already.
py_venv_packages=(nanobind==3.1.0 scikit-build-core==1.1.2 pytest==9.2.0)
setup_py_venv() {
  [ "${ZERO_SETUP_PY_VENV:-1}" = 1 ] || return 0
  local venv=${ZERO_PY_VENV:-${HOME:-$(cd ~ && pwd)}/.cache/zero/py-venv}
  local check='import nanobind, scikit_build_core, pytest, numpy'
  if [ -x "$venv/bin/python3" ] && "$venv/bin/python3" -c "$check" 2>/dev/null; then
    echo "setup: Python module build venv ready ($venv)"
    return 0
  fi
  echo "setup: creating the Python module build venv in $venv"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv --clear --system-site-packages "$venv"
  "$venv/bin/python3" -m pip --disable-pip-version-check --no-input -q install "${py_venv_packages[@]}"
  "$venv/bin/python3" -c "$check"
  echo "setup: Python module build venv ready ($venv)"
}
# Where nvcc is, the cudnn_frontend headers the cuDNN attention compiles against (fetched once into
# ~/.cache/zero; without them the CUDA build goes without it, and says so at configure).
setup_cudnn_frontend() {
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    bash scripts/cudnn_frontend.sh >/dev/null ||
      echo "setup: cudnn_frontend headers not fetched: the CUDA build goes without cuDNN attention"
  fi
}
setup_venv() {
  if [ "$main_job" = 0 ]; then
    if [ "${ZERO_SETUP_VENV:-1}" = 1 ]; then bash scripts/setup_venv.sh; fi
    setup_py_venv
  fi
  setup_cudnn_frontend
}
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  setup_venv
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# python3-torch is optional (golden tests skip without it): never fail setup over it.
required=()
for p in "${missing[@]}"; do [ "$p" = python3-torch ] || required+=("$p"); done
if [ ${#required[@]} -gt 0 ]; then
  $sudo apt-get install -y -qq --no-install-recommends "${required[@]}"
fi
for p in "${missing[@]}"; do
  if [ "$p" = python3-torch ]; then
    $sudo apt-get install -y -qq --no-install-recommends python3-torch || echo "setup: python3-torch unavailable; golden tests will skip (a CI=true test.sh run then fails)"
  fi
done
setup_venv
