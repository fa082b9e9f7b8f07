"""DeepSpeed configs resolved and checked as `zero config` does (and `zero train` would)."""

from __future__ import annotations

import json
import logging
import os

from . import _zero
from ._flags import check_exists
from ._flags import words as _words
from ._zero import ArgumentTypeError

_log = logging.getLogger("zero")


def _source(path_or_dict):
    if isinstance(path_or_dict, (str, os.PathLike)):
        path = os.fspath(path_or_dict)
        check_exists("path_or_dict", path)
        return path, None, path
    if isinstance(path_or_dict, dict):
        return None, json.dumps(path_or_dict), "<dict>"
    raise ArgumentTypeError(
        f"path_or_dict: expected a config path or dict, got {type(path_or_dict).__name__}")


def resolve(path_or_dict: str | os.PathLike | dict, **flags) -> dict:
    """The config resolved with the flags given (keywords: `zero config`'s flags, e.g.
    world_size=8, per_device_train_batch_size=4): "auto" filled, deprecated keys mapped,
    DeepSpeed's defaults and batch rule applied. Flags not given take Hugging Face's defaults
    (no_defaults=True: only the flags given). Raises zero.ConfigError listing every error."""
    path, text, name = _source(path_or_dict)
    resolved, warnings, notes = _zero.resolve_config(_words(flags, "config"), path, text, name)
    for line in notes + [f"warning: {warning}" for warning in warnings]:
        _log.info("zero config: %s", line)
    return json.loads(resolved)


def validate(path_or_dict: str | os.PathLike | dict, **flags) -> list[str]:
    """The errors `resolve` would raise, one message each (its JSON path, the value, what was
    expected and, for unknown keys, "did you mean ..."): an empty list for a valid config."""
    path, text, name = _source(path_or_dict)
    return _zero.validate_config(_words(flags, "config"), path, text, name)
