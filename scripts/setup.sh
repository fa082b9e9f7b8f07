#!/usr/bin/env bash
# Installs, idempotently, the Debian packages zero builds and tests with, then the golden tests'
# private Python venv (scripts/setup_venv.sh; ZERO_SETUP_VENV=0 skips it).
# Only installs what is missing; needs root (or sudo) only when something is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  liburing-dev  # NVMe swap: io_uring, O_DIRECT (libzero/src/offload/)
  fio           # benchmarks/nvme_bench: the same I/O measured by fio, side by side
  libopenmpi-dev openmpi-bin
  libgloo-dev  # the Gloo communicator (torchrun, srun without PMI)
  iproute2     # `ip netns`: the two-host Gloo test (tests/comm/two_host_netns.sh)
  libeigen3-dev libopenblas-dev
  libdnnl-dev  # oneDNN: the GPT-2 bf16 GEMMs (AMX / AVX512-BF16 matmul)
  libboost-program-options-dev
  nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev
  python3 python3-venv python3-numpy python3-regex  # python3-regex: tests/golden/gpt2_tokenizer_reference.py
  fortunes  # the demo corpus: /usr/share/games/fortunes (scripts/demo.sh, `zero train`)
  gnuplot-nox  # `zero train`: output_dir/loss.svg (skipped with a warning without it)
  universal-ctags  # scripts/check_lengths.sh (ctest code_lengths): function spans
)
if [ "${ZERO_SETUP_TORCH:-1}" = 1 ]; then packages+=(python3-torch); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
setup_venv() {
  if [ "${ZERO_SETUP_VENV:-1}" = 1 ]; then bash scripts/setup_venv.sh; fi
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
