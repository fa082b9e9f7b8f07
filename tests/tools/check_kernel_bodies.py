#!/usr/bin/env python3
"""Every __global__ kernel of the tree is a wrapper over a __host__ __device__ body that a CPU
emulation test runs (docs/kernels.md, "Kernel bodies and their CPU emulation").

A kernel's body may declare its __shared__ struct and must then be one call
`[kernels::]NAME_body[<...>](DeviceThread{}, ...)`; NAME_body must be called in a test named
*emulation_test.cc or in a fixture header they share (*emulation.h). A body that takes shared
memory (a parameter named `shared`) reaches it only through views, `thread.shared(shared...)`
(kernel_thread.h's SharedView), so the emulator sees every access and its race check can fail.
Library calls (cuBLASLt, cuDNN) are not kernels of ours and are not seen here.
    check_kernel_bodies.py SOURCE_DIR
"""
import pathlib
import re
import sys

KERNEL = re.compile(r"__global__\s+void\s+(\w+)\s*\(")
CALL = re.compile(r"^(?:__shared__\s+[\w:<>, ]+\s+shared;)?"
                  r"(?:kernels::)?(\w+_body)(?:<[^;]*?>)?\(DeviceThread\{\}[^;]*\);$")
SKIP_PARTS = {".git", ".device"}
PLANTED = "tests/tools/planted_spill.cu"
# Bodies whose shared memory is still raw, each with its reason.
RAW_SHARED = {}


def function_body(text, start):
    """The text between the braces of the function whose header starts at `start`."""
    depth, i = 0, text.index("(", start)
    while True:  # past the parameter list
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            break
    open_brace = text.index("{", i)
    depth, i = 0, open_brace
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            return text[open_brace + 1:i - 1]


def raw_shared_use(headers, name):
    """Whether body `name`, defined in `headers` with a parameter named `shared`, touches it other
    than through thread.shared(shared...)."""
    for match in re.finditer(r"ZERO_HOST_DEVICE\s+void\s+" + name + r"\s*\(", headers):
        start = match.start()
        params = headers[headers.index("(", start):headers.index("{", start)]
        if not re.search(r"\bshared\b", params):
            return False
        rest = re.sub(r"thread\.shared\(shared\b", "", function_body(headers, start))
        return re.search(r"(?<!thread\.)\bshared\b", rest) is not None
    return False


def main(root):
    root = pathlib.Path(root).resolve()
    sources = sorted(p for p in root.rglob("*.cu")
                     if not SKIP_PARTS & set(p.relative_to(root).parts)
                     and not p.relative_to(root).parts[0].startswith("build")
                     and p.relative_to(root).as_posix() != PLANTED)
    # The emulation tests and the fixture headers they share (tests/model/gpt2_cuda_emulation.h).
    tests = "\n".join(p.read_text() for pattern in ("tests/**/*emulation_test.cc",
                                                     "tests/**/*emulation.h")
                       for p in root.glob(pattern))
    headers = "\n".join(p.read_text() for p in sorted(root.rglob("*.h"))
                        if not SKIP_PARTS & set(p.relative_to(root).parts)
                        and not p.relative_to(root).parts[0].startswith("build"))
    problems, kernels = [], 0
    for source in sources:
        text = source.read_text()
        for match in KERNEL.finditer(text):
            kernels += 1
            where = f"{source.relative_to(root)}: {match.group(1)}"
            body = re.sub(r"\s+", "", function_body(text, match.start()))
            body = body.replace("__shared__", "__shared__ ", 1)
            body = re.sub(r"__shared__ ([\w:<>,]+?)shared;", r"__shared__ \1 shared;", body)
            call = CALL.match(body)
            if not call:
                problems.append(f"{where} is not one call of a *_body(DeviceThread{{}}, ...)")
            elif not re.search(r"\b" + call.group(1) + r"\b", tests):
                problems.append(f"{where}'s {call.group(1)} runs in no *emulation_test.cc or *emulation.h")
            elif call.group(1) not in RAW_SHARED and raw_shared_use(headers, call.group(1)):
                problems.append(f"{where}'s {call.group(1)} touches shared memory other than "
                                "through thread.shared(shared...) views")
    if kernels == 0:
        problems.append(f"no __global__ kernel found under {root}")
    for problem in problems:
        print("FAIL:", problem)
    if problems:
        return 1
    print(f"kernel bodies: {kernels} kernels in {len(sources)} files, each a wrapper over a body "
          "an emulation test runs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
