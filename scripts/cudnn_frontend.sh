#!/usr/bin/env bash
# Fetches NVIDIA's cudnn_frontend C++ headers (header-only; the PyPI package nvidia-cudnn-frontend,
# pinned below) into a cache outside the tree and prints their include folder. The CUDA build's
# cuDNN attention (model/gpt2/src/cuda/attention_cudnn.cc) compiles against them; configure finds
# them there (model/gpt2/CMakeLists.txt, ZERO_CUDNN_FRONTEND_INCLUDE) or goes without.
#   ZERO_CUDNN_FRONTEND_DIR  the cache (default ~/.cache/zero/cudnn_frontend)
set -euo pipefail
version=1.32.0
cache=${ZERO_CUDNN_FRONTEND_DIR:-${HOME:-$(cd ~ && pwd)}/.cache/zero/cudnn_frontend}
include=$cache/$version/include
if [[ ! -f $include/cudnn_frontend.h ]]; then
  python=${PYTHON:-python3}
  command -v "$python" >/dev/null || { echo "cudnn_frontend.sh: no $python to fetch with" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # Debian's python3 has no pip without python3-pip: a throwaway venv (python3-venv) brings one.
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    "$python" -m venv "$tmp/venv" >&2
    python=$tmp/venv/bin/python3
  fi
  "$python" -m pip download --quiet --no-deps --only-binary=:all: \
    "nvidia-cudnn-frontend==$version" -d "$tmp" >&2
  wheel=$(find "$tmp" -name 'nvidia_cudnn_frontend-*.whl' | head -n 1)
  [[ -n $wheel ]] || { echo "cudnn_frontend.sh: no wheel of nvidia-cudnn-frontend $version" >&2; exit 1; }
  # Only the headers, into a temporary folder renamed into place (no half-written cache).
  "$python" - "$wheel" "$tmp/out" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = [n for n in wheel.namelist() if n.startswith("include/")]
    if not any(n.endswith("/cudnn_frontend.h") or n == "include/cudnn_frontend.h" for n in names):
        sys.exit("cudnn_frontend.sh: the wheel has no include/cudnn_frontend.h")
    wheel.extractall(sys.argv[2], names)
PY
  mkdir -p "$cache"
  rm -rf "${cache:?}/$version"
  mv "$tmp/out" "$cache/$version"
fi
echo "$include"
