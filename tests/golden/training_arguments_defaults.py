"""Writes transformers.TrainingArguments' fields and defaults as JSON for tests/train/flags_golden_test.

Usage: training_arguments_defaults.py OUT.json
{"version": "4.46.3", "defaults": {"learning_rate": "5e-05", "output_dir": "(required)", ...}}
Each default is Python's repr of the field's default; "(required)" for a field without one.
Exits 1 when transformers cannot be imported.
"""
import dataclasses
import json
import sys

try:
    import transformers
    from transformers import TrainingArguments
except Exception as error:  # noqa: BLE001 - any import failure means "not available"
    print(f"transformers not importable: {error}", file=sys.stderr)
    sys.exit(1)

defaults = {}
for field in dataclasses.fields(TrainingArguments):
    if field.default is not dataclasses.MISSING:
        defaults[field.name] = repr(field.default)
    elif field.default_factory is not dataclasses.MISSING:
        defaults[field.name] = repr(field.default_factory())
    else:
        defaults[field.name] = "(required)"
with open(sys.argv[1], "w") as out:
    json.dump({"version": transformers.__version__, "defaults": defaults}, out)
