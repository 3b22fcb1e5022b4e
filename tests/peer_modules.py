"""torch, transformers and their submodules for the tests that hold onebit to them, imported
when a test first uses one, not when pytest collects the test's module.

Under xdist every worker collects every module, while `--dist loadfile` gives each module's
tests to one worker. A module-level `pytest.importorskip("torch")` therefore made every worker
import torch and transformers before running a test: 2.4 s of CPU each with bytecode cached,
4.4 s where it is not written (PYTHONDONTWRITEBYTECODE), 6.5 s with sympy, measured on two
cores. `lazy("torch")` stands in for the module and imports it at the first attribute read; a
module that cannot be imported skips the test that asked, with `pytest.importorskip`'s reason.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

#: a module's own dunder attributes, read through to it
MODULE_DUNDERS = frozenset({"__version__", "__file__", "__path__"})


class LazyModule:
    """A module imported at its first attribute read (`torch.tensor`, `transformers.AutoConfig`);
    where it cannot be imported, the test reading it is skipped."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            try:
                self._module = importlib.import_module(self._name)
            except ImportError as error:
                pytest.skip(f"could not import {self._name!r}: {error}")
        return self._module

    def __getattr__(self, attribute: str) -> Any:
        # pytest's collection, copy and pickle probe a module-level object for private and
        # dunder names (`_pytestfixturefunction`, `__wrapped__`, ...): the stand-in has none,
        # and answering them must not import the module
        if attribute.startswith("_") and attribute not in MODULE_DUNDERS:
            raise AttributeError(attribute)
        return getattr(self._load(), attribute)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r}, {state}>"


def lazy(name: str) -> LazyModule:
    """`name`, imported when first used (see the module's docstring)."""
    return LazyModule(name)
