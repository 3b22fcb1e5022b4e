"""The base contract with nothing else, for one command line:

    pytest --pyargs pytest_onebit.base.conformance --onebit-base=my_package.models:make_base

holds the bases `make_base()` returns to checks B1..B8 (docs/base-contract.md).
"""

from pytest_onebit.base.suite import BaseContract


class TestBase(BaseContract):
    """B1..B8 on the factory --onebit-base names (default: the strict toy base)."""
