#!/usr/bin/env python3
"""Checks that every #include of the project points down its dependency order (ctest include_order).

The order, lowest first (docs/ARCHITECTURE.md, "Dependency rules"):

  0  zero::core (libzero/), itself layered: core (src/core, src/cpu, src/cuda, zero/core)
     <- comm, config <- engine <- checkpoint
  1  zero::optim (optim/), zero::offload (offload/), zero::text (model/text/)
  2  zero::factory (factory/: make_engine), zero::gpt2 (model/gpt2/)
  3  zero::train (train/), itself layered: config <- kind <- prepare <- plan <- task <- run <- cli
     (train/src/<layer>/; its public headers, include/zero/train/, each in a layer by name)
  4  tools/, examples/, benchmarks/, bindings/
  5  tests/ (they test everything, the CLI's own code included)

A file may include its own component and anything strictly lower; components on one level are
peers and include none of each other. A library never includes another target's private headers
(its src/); tests may, to test internals, and benchmarks, to time them (gpt2_cuda_bench times the
CUDA kernels that only GPT2Compute calls). Public headers (include/zero/...) include no CUDA, NCCL,
MPI or Gloo header, so the CPU-only build and the bindings compile everywhere.

Usage: check_includes.py [SOURCE_DIR]   (exit 0: clean; 1: violations, each printed)
"""

import os
import re
import sys

# (path prefix, component, level). Longest prefix wins; libzero's layers are components of their
# own at fractional levels, so "up" inside the core is caught the same way.
COMPONENTS = [
    ("libzero/include/zero/core/", "core", 0.0),
    ("libzero/src/core/", "core", 0.0),
    ("libzero/src/cpu/", "core", 0.0),
    ("libzero/src/cuda/", "core", 0.0),
    ("libzero/include/zero/comm/", "core/comm", 0.1),
    ("libzero/src/comm/", "core/comm", 0.1),
    ("libzero/include/zero/config/", "core/config", 0.1),
    ("libzero/src/config/", "core/config", 0.1),
    ("libzero/include/zero/engine/", "core/engine", 0.2),
    ("libzero/src/engine/", "core/engine", 0.2),
    ("libzero/include/zero/checkpoint/", "core/checkpoint", 0.3),
    ("libzero/src/checkpoint/", "core/checkpoint", 0.3),
    ("optim/", "optim", 1),
    ("offload/", "offload", 1),
    ("model/text/", "text", 1),
    ("factory/", "factory", 2),
    ("model/gpt2/", "gpt2", 2),
    ("train/", "train", 3),  # a file of train/ in none of its layers: reported (TRAIN_LAYERS)
    ("tools/", "tools", 4),
    ("examples/", "examples", 4),
    ("benchmarks/", "benchmarks", 4),
    ("bindings/", "bindings", 4),
    ("tests/", "tests", 5),
]

# train/'s layers, lowest first (train/CMakeLists.txt): each a component at a fractional level
# under train's 3, with its folder of train/src and its public headers by name.
TRAIN_LAYERS = [
    ("config", ["arguments.h", "config_precedence.h", "hf_schedule.h", "input_error.h",
                "token_dataset.h"]),
    ("kind", ["classification_data.h", "classification_metrics.h", "dataset_folder.h",
              "datasets_cache.h", "hub_cache.h"]),
    ("prepare", ["run_config.h"]),
    ("plan", ["plan.h", "run_types.h"]),
    ("task", []),
    ("run", ["monitors.h", "trainer.h"]),
    ("cli", ["cli.h", "command_arguments.h", "config_command.h", "estimate.h", "flag_options.h",
             "flags.h", "launch_flags.h", "train_command.h"]),
]
for index, (layer, headers) in enumerate(TRAIN_LAYERS):
    level = 3 + index / 10
    COMPONENTS.append((f"train/src/{layer}/", f"train/{layer}", level))
    COMPONENTS.extend((f"train/include/zero/train/{header}", f"train/{layer}", level)
                      for header in headers)

# The folder of each library target: its include/ is public, everything else private.
TARGET_ROOTS = ["libzero/", "optim/", "offload/", "model/text/", "factory/", "model/gpt2/", "train/"]

SOURCE_SUFFIXES = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh")
SKIPPED_DIRS = {".git", "build", "_deps", "__pycache__"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# System headers a public header must not include.
FORBIDDEN_IN_PUBLIC = re.compile(r"^(cuda|cublas|cudnn|nccl|mpi|gloo|curand|cufft|thrust|cub)")


def component_of(path):
    best = None
    for prefix, name, level in COMPONENTS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, name, level)
    return None if best is None else (best[1], best[2])


def target_of(path):
    for root in TARGET_ROOTS:
        if path.startswith(root):
            return root
    return None


def is_public(path):
    root = target_of(path)
    return root is not None and path.startswith(root + "include/")


def source_files(source_dir):
    for directory, subdirs, files in os.walk(source_dir):
        subdirs[:] = sorted(d for d in subdirs
                            if d not in SKIPPED_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(directory, name), source_dir)


def main():
    source_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                                 os.path.join(os.path.dirname(__file__), ".."))
    files = [f for f in source_files(source_dir) if component_of(f) is not None]
    by_suffix = {}
    for f in files:
        parts = f.split("/")
        for i in range(len(parts)):
            by_suffix.setdefault("/".join(parts[i:]), []).append(f)
    include_roots = [root + "include/" for root in TARGET_ROOTS]

    def resolve(including, name):
        local = os.path.normpath(os.path.join(os.path.dirname(including), name))
        if os.path.isfile(os.path.join(source_dir, local)):
            return local
        for root in include_roots:
            if os.path.isfile(os.path.join(source_dir, root, name)):
                return root + name
        # Found through a target's private include directories (CMake): by path suffix.
        candidates = by_suffix.get(os.path.normpath(name), [])
        if len(candidates) > 1:
            own = [c for c in candidates if component_of(c) == component_of(including)]
            candidates = own or candidates
        return candidates[0] if len(candidates) == 1 else None

    violations = [f"{f}: in none of train/'s layers (TRAIN_LAYERS in scripts/check_includes.py)"
                  for f in files if component_of(f)[0] == "train"]
    checked = 0
    for f in files:
        name, level = component_of(f)
        with open(os.path.join(source_dir, f), encoding="utf-8", errors="replace") as stream:
            lines = stream.read().splitlines()
        for number, line in enumerate(lines, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            bracket, included = match.groups()
            where = f"{f}:{number}"
            if bracket == "<" and not included.startswith("zero/"):
                if is_public(f) and FORBIDDEN_IN_PUBLIC.match(included):
                    violations.append(f"{where}: public header includes <{included}> "
                                      "(public headers include no CUDA, NCCL, MPI or Gloo header)")
                continue
            target = resolve(f, included)
            if target is None:
                continue  # a system or generated header
            checked += 1
            target_component = component_of(target)
            if target_component is None:
                continue
            target_name, target_level = target_component
            if target_name != name and target_level >= level:
                relation = "a peer" if target_level == level else "above it"
                violations.append(f"{where}: {name} includes {target} ({target_name}, {relation})")
            elif (target_of(target) is not None and target_of(target) != target_of(f)
                  and not is_public(target) and name not in ("tests", "benchmarks")):
                violations.append(f"{where}: {name} includes {target}, private to "
                                  f"{target_of(target).rstrip('/')} (give it a public header)")
    for violation in violations:
        print(violation)
    status = "ok" if not violations else f"{len(violations)} violation(s)"
    print(f"check_includes: {len(files)} files, {checked} project includes: {status}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
