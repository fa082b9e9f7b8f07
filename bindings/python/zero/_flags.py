"""Keyword arguments as command-line words for the flag table's parser (zero/train/flag_options.h),
each value's Python type checked first against the flag's type in that table, and the path
arguments checked to exist: a wrong type is zero.ArgumentTypeError (a TypeError), an absent file
zero.MissingFileError (a FileNotFoundError), each naming the argument."""

import errno
import numbers
import os

from . import _zero
from ._zero import ArgumentTypeError, MissingFileError

_TYPES = {}

# What each flag type takes from Python, in words for the error.
_EXPECTED = {
    "bool": "a bool",
    "int": "an int",
    "float": "a float or an int",
    "str": "a str, a path or a number",
    "str or bool": "a str or a bool",
    "list": "a str, a path or a list of them",
}

# The arguments that name files which must exist when given (each of a list, too).
PATH_ARGUMENTS = ("train_file", "validation_file", "test_file")


def flag_types(command):
    """{flag or alias: its type} of `command`'s flag table (cached)."""
    if command not in _TYPES:
        _TYPES[command] = _zero.flag_types(command)
    return _TYPES[command]


def _is_path(value):
    return isinstance(value, (str, os.PathLike))


def _accepts(kind, value):
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind == "str or bool":
        return isinstance(value, (str, bool))
    if kind == "list":
        if isinstance(value, (list, tuple)):
            return all(_is_path(item) for item in value)
        return _is_path(value)
    return _is_path(value) or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def check_type(name, value, expected, accepted):
    """Raises ArgumentTypeError naming `name` unless accepted(value)."""
    if not accepted(value):
        raise ArgumentTypeError(
            f"{name}: expected {expected}, got {type(value).__name__} {value!r}")


def check_types(command, flags):
    """Each value of `flags` against its flag's type in `command`'s table; names the table does
    not know are left to the parser (its "unknown option ...; did you mean" error)."""
    types = flag_types(command)
    for name, value in flags.items():
        kind = types.get(name)
        if value is None or kind is None:
            continue
        check_type(name, value, _EXPECTED.get(kind, kind), lambda v, k=kind: _accepts(k, v))


def check_exists(argument, path):
    """Raises MissingFileError (.argument, .filename) unless `path` exists."""
    if not os.path.exists(path):
        error = MissingFileError(errno.ENOENT, f"{argument}: no such file or directory", path)
        error.argument = argument
        raise error


def check_paths(flags, names=PATH_ARGUMENTS):
    """Each file named by the arguments `names` exists (a comma-separated str or a list)."""
    for name in names:
        value = flags.get(name)
        if value is None:
            continue
        items = value if isinstance(value, (list, tuple)) else os.fspath(value).split(",")
        for item in items:
            if os.fspath(item):
                check_exists(name, os.fspath(item))


def words(flags, command=None):
    """Keyword arguments as `--name value` words (`--name=value` for a value that starts with
    "-"): bools True/False, lists comma-separated, None left out (the flag's default). With
    `command`, each value's type is checked against that command's flag table first."""
    if command is not None:
        check_types(command, flags)
    out = []
    for name, value in flags.items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "True" if value else "False"
        elif isinstance(value, (list, tuple)):
            text = ",".join(os.fspath(item) if _is_path(item) else str(item) for item in value)
        else:
            text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        out.extend([f"--{name}={text}"] if text.startswith("-") else [f"--{name}", text])
    return out
