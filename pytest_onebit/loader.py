"""`MODULE:NAME` specs, as `--onebit-loop`, `--onebit-base` and `onebit prove --loop` take them.

The module is imported the way `python -m` would: the current directory comes first on the
import path, so `my_engine.loop:run` works from the project that holds `my_engine/`. Whatever
goes wrong (a bad spec, a module that does not exist or raises while it is imported, a name
that is missing or not callable) is one `LoadError` saying so in one line.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


class LoadError(ValueError):
    """A `MODULE:NAME` spec does not name a callable that can be imported."""


def load_object(spec: str, *, what: str = "MODULE:FUNC") -> Any:
    """The callable `spec` (`MODULE:NAME`, NAME may be dotted) names."""
    if not isinstance(spec, str):
        raise LoadError(f"wants {what}, got {spec!r}")
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise LoadError(f"wants {what}, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise LoadError(f"{spec}: cannot import {module_name}: {error}") from error
    except BaseException as error:  # noqa: BLE001 - a module may raise anything at import
        if isinstance(error, KeyboardInterrupt):
            raise
        first = " ".join(str(error).split()) or "(no message)"
        raise LoadError(f"{spec}: importing {module_name} raised "
                        f"{type(error).__name__}: {first}") from error
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise LoadError(f"{spec}: {module_name} has no callable {attr!r}")
    if not callable(target):
        raise LoadError(f"{spec}: {module_name}.{attr} is a {type(target).__name__}, "
                        "not a callable")
    return target


def load_loop(spec: str):
    """The `run()` implementation `spec` names."""
    return load_object(spec, what="MODULE:FUNC")
