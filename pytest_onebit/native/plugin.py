"""The plugin's part for compiled loops and bases: `--onebit-loop-lib=PATH.so[:SYMBOL]`,
`--onebit-base-lib=PATH.so[:MAKE[:FREE]]` and `--onebit-lib-timeout` (wired into
pytest_onebit/plugin.py). Imports only pytest until an option is given."""

from __future__ import annotations

import pytest


def add_native_options(group: pytest.OptionGroup) -> None:
    group.addoption("--onebit-loop-lib", default=None, metavar="PATH.so[:SYMBOL]",
                    help="hold a compiled loop's onebit_run (or SYMBOL) to the contract "
                    "instead of --onebit-loop (C ABI, docs/c-abi.md)")
    group.addoption("--onebit-base-lib", default=None, metavar="PATH.so[:MAKE[:FREE]]",
                    help="hold a compiled base (onebit_make_base / onebit_free_base by "
                    "default) to B1..B7 instead of --onebit-base")
    group.addoption("--onebit-require-compiler", action="store_true",
                    help="fail, instead of skipping, a test that needs the system C/C++ "
                    "compiler when there is none (the c_loop mutant catalogue passes it, so a "
                    "machine without g++ cannot report its mutants as survivors)")
    group.addoption("--onebit-lib-timeout", default=10.0, type=float, metavar="SECONDS",
                    help="the most one run of a compiled loop may take (default 10)")


def native_loop_option(config: pytest.Config):
    """The compiled loop --onebit-loop-lib names (probed), or None; a bad library is a usage
    error naming it."""
    spec = config.getoption("onebit_loop_lib", None)
    if not spec:
        return None
    from pytest_onebit.native.library import LibraryError
    from pytest_onebit.native.loop import native_loop

    try:
        return native_loop(spec, timeout=config.getoption("onebit_lib_timeout"))
    except LibraryError as error:
        raise pytest.UsageError(f"--onebit-loop-lib {error}") from None


def native_base_option(config: pytest.Config):
    """The factory of the compiled base --onebit-base-lib names, or None."""
    spec = config.getoption("onebit_base_lib", None)
    if not spec:
        return None
    from pytest_onebit.native.base import native_base_factory
    from pytest_onebit.native.library import LibraryError

    try:
        return native_base_factory(spec)
    except LibraryError as error:
        raise pytest.UsageError(f"--onebit-base-lib {error}") from None


def abi_mode(config: pytest.Config) -> bool:
    """True when the loop under test is compiled: the scenarios' toy is then float32-exact."""
    return bool(config.getoption("onebit_loop_lib", None))
