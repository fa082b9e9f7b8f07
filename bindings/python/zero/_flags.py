"""Keyword arguments as command-line words for the flag table's parser (zero/train/flag_options.h)."""

import os


def words(flags):
    """Keyword arguments as `--name value` words (`--name=value` for a value that starts with
    "-"): bools True/False, lists comma-separated, None left out (the flag's default)."""
    out = []
    for name, value in flags.items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "True" if value else "False"
        elif isinstance(value, (list, tuple)):
            text = ",".join(str(item) for item in value)
        else:
            text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        out.extend([f"--{name}={text}"] if text.startswith("-") else [f"--{name}", text])
    return out
