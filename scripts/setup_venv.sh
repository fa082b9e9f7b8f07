#!/usr/bin/env bash
# The golden tests' private Python: a virtual environment outside the checkout,
# ${ZERO_VENV:-$HOME/.cache/zero/venv}, over Debian's python3 with --system-site-packages so that
# Debian's python3-torch (1.13) stays the torch of every reference, plus from PyPI what Debian
# lacks:
#   datasets, tokenizers  run_clm's blocks (tests/golden/run_clm_blocks_reference.py)
#   deepspeed             its deepspeed.runtime.lr_schedules is the LR-schedule oracle
#   transformers          `zero train`'s saved model loads in GPT2LMHeadModel (tests/train)
#   tensorboard           reads `zero train`'s event files (tests/train)
#   tiktoken              the tokenizer tests' reference (built offline from the local BPE files)
# transformers 4.46 is the newest that runs its PyTorch models over torch 1.13; it needs
# tokenizers < 0.21 and huggingface_hub < 1.0, hence datasets 3.6 (datasets 4+ wants a newer hub).
# DeepSpeed 0.19 declares torch>=2.0, but its lr_schedules (and `import deepspeed` on a CPU-only
# machine) run over torch 1.13; letting pip resolve that requirement would replace Debian's torch
# with a multi-GB wheel and its CUDA libraries. So deepspeed is installed without dependencies
# (DS_BUILD_OPS=0: no compiled ops, pure Python; built without isolation against the torch
# present) and its pure-Python dependencies are listed here. cmake picks the venv's python3 as
# ZERO_PYTHON for the tests (cmake/ZeroTesting.cmake). Versions are pinned: they are oracles.
# numpy is held at Debian's version (a constraint): torch 1.13 is built against numpy 1.x, and a
# numpy 2 in the venv (pulled by a newer pandas) breaks torch's tensor.numpy(); pyarrow 26 needs
# numpy 2, 25 runs on numpy 1.24.
# Idempotent: when the venv imports everything, nothing is installed (a few seconds); otherwise it is made anew.
set -euo pipefail
venv=${ZERO_VENV:-${HOME:-$(cd ~ && pwd)}/.cache/zero/venv}
system_python=${ZERO_SYSTEM_PYTHON:-/usr/bin/python3}
packages=(datasets==3.6.0 tokenizers==0.20.3 pyarrow==25.0.0 transformers==4.46.3 tensorboard==2.21.0
          tiktoken==0.14.0)
deepspeed=deepspeed==0.19.8
deepspeed_deps=(einops hjson msgpack "packaging>=20.0" psutil py-cpuinfo "pydantic>=2.0.0" tqdm)

has_torch=0
if "$system_python" -c 'import torch' 2>/dev/null; then has_torch=1; fi
check='import datasets, tokenizers, tensorboard, tiktoken'
if [ "$has_torch" = 1 ]; then
  check+='; import torch, transformers, deepspeed.runtime.lr_schedules; torch.zeros(1).numpy()'
fi
if [ -x "$venv/bin/python3" ] && "$venv/bin/python3" -c "$check" >/dev/null 2>&1; then
  echo "setup: golden-test venv ready ($venv)"
  exit 0
fi
echo "setup: creating the golden-test venv in $venv"
mkdir -p "$(dirname "$venv")"
"$system_python" -m venv --clear --system-site-packages "$venv"
constraints="$venv/zero-constraints.txt"
: >"$constraints"
if numpy_version=$("$system_python" -c 'import numpy; print(numpy.__version__)' 2>/dev/null); then
  echo "numpy==$numpy_version" >"$constraints"
fi
pip=("$venv/bin/python3" -m pip --disable-pip-version-check --no-input -q)
"${pip[@]}" install -c "$constraints" "${packages[@]}"
if [ "$has_torch" = 1 ]; then
  "${pip[@]}" install -c "$constraints" "${deepspeed_deps[@]}"
  DS_BUILD_OPS=0 "${pip[@]}" install --no-deps --no-build-isolation "$deepspeed"
else
  echo "setup: no torch in $system_python: deepspeed not installed (golden tests will skip)"
fi
"$venv/bin/python3" -c "$check" >/dev/null 2>&1 || {
  echo "setup: the venv in $venv cannot run: $check" >&2
  exit 1
}
echo "setup: golden-test venv ready ($venv)"
