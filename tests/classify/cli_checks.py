"""What the classification command-line tests share: failures collected by check(), and run(),
which runs a command and stops the test when it exits other than expected."""
import os
import subprocess
import sys

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run(args, expect=0):
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != expect:
        print(result.stdout[-4000:], result.stderr[-4000:])
        print(f"FAIL: exit {result.returncode}, expected {expect}: {' '.join(args)}")
        sys.exit(1)
    return result.stdout + result.stderr


def golden_modules():
    """(torch, transformers) of the golden venv, offline and quiet, once the zero checks passed:
    it exits 1 when one failed, 77 (after printing "skipped:") where they cannot be imported."""
    if failures:
        sys.exit(status(""))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        import transformers
        from transformers.utils import logging as hf_logging
    except Exception as error:  # noqa: BLE001
        print(f"skipped: the zero checks passed; the golden venv is not there ({error})")
        sys.exit(77)
    hf_logging.set_verbosity_error()
    return torch, transformers


def status(passed_line):
    """The exit status: 1 after printing the number of failures, else 0 after `passed_line`."""
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print(passed_line)
    return 0
