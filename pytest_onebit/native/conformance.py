"""The loop contract for a compiled loop, for one command line:

    pytest --pyargs pytest_onebit.native.conformance --onebit-loop-lib=PATH.so[:SYMBOL]

holds the library's `onebit_run` to I1..I13 on the float32-exact toy and to F1 (faults)
(docs/c-abi.md).
"""

from pytest_onebit.native.suite import NativeLoopContract


class TestLoopLibrary(NativeLoopContract):
    """I1..I13 and F1 on the library --onebit-loop-lib names."""
