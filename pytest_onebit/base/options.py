"""The plugin's part for base models: the `--onebit-base=MODULE:FACTORY` option and the
`onebit_base` fixture that `BaseContract` reads (wired into pytest_onebit/plugin.py).

Nothing heavy is imported here: the factory's module is imported only when the option names
one (at configure time, so a bad spec is a usage error) or when a test asks for the default.
"""

from __future__ import annotations

import pytest

DEFAULT_BASE = "pytest_onebit.base.options:strict_toy_base"


def strict_toy_base():
    """The default base under test: the toy base, refusing misuse instead of counting it."""
    from pytest_onebit.doubles.toy import ToyBase

    return ToyBase(strict=True)


def add_base_options(group: pytest.OptionGroup) -> None:
    group.addoption(
        "--onebit-base",
        default=None,
        metavar="MODULE:FACTORY",
        help="the base model factory BaseContract holds (a function of no arguments that "
        f"returns a fresh base; default {DEFAULT_BASE})",
    )


def load_factory(spec: str):
    """The callable `MODULE:FACTORY` names; pytest.UsageError saying what is wrong otherwise."""
    from pytest_onebit.loader import LoadError, load_object

    try:
        return load_object(spec, what="MODULE:FACTORY")
    except LoadError as error:
        raise pytest.UsageError(f"--onebit-base {error}") from None


def configure_base(config: pytest.Config) -> None:
    """Load the factory the option names now, so a bad spec stops the run before collection."""
    spec = config.getoption("onebit_base", None)
    config._onebit_base = load_factory(spec) if spec else None  # type: ignore[attr-defined]


def base_header(config: pytest.Config) -> str:
    return f"base {config.getoption('onebit_base', None) or DEFAULT_BASE}"


@pytest.fixture(scope="session")
def onebit_base(request: pytest.FixtureRequest):
    """The base factory under test: what --onebit-base names, or the strict toy base."""
    factory = getattr(request.config, "_onebit_base", None)
    return factory if factory is not None else strict_toy_base
