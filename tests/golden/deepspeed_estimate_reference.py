"""DeepSpeed's own model-state estimators, for tests/train/deepspeed_estimate_test.cc.

Usage: deepspeed_estimate_reference.py OUT P L GPUS_PER_NODE NODES [P L GPUS NODES ...]
For each case writes to OUT, in order: the text estimate_zero2_model_states_mem_needs_all_cold
prints, then estimate_zero3_model_states_mem_needs_all_cold's, each followed by a line "--end--".
Exits 3 when deepspeed is not importable.
"""
import contextlib
import io
import os
import sys

try:
    with contextlib.redirect_stderr(io.StringIO()):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        from deepspeed.runtime.zero.stage_1_and_2 import (
            estimate_zero2_model_states_mem_needs_all_cold as zero2)
        from deepspeed.runtime.zero.stage3 import (
            estimate_zero3_model_states_mem_needs_all_cold as zero3)
except Exception as error:  # noqa: BLE001 - any import failure means "skip"
    print(f"deepspeed not importable: {error}", file=sys.stderr)
    sys.exit(3)


def number(text):
    value = float(text)
    return int(value) if value.is_integer() else value


def main():
    out_path, values = sys.argv[1], sys.argv[2:]
    if len(values) % 4:
        sys.exit("arguments: OUT then groups of P L GPUS_PER_NODE NODES")
    with open(out_path, "w") as out:
        for i in range(0, len(values), 4):
            total, largest = number(values[i]), number(values[i + 1])
            gpus, nodes = int(values[i + 2]), int(values[i + 3])
            for call in (lambda: zero2(total, gpus, nodes),
                         lambda: zero3(total, largest, gpus, nodes)):
                text = io.StringIO()
                with contextlib.redirect_stdout(text):
                    call()
                out.write(text.getvalue() + "--end--\n")


if __name__ == "__main__":
    main()
