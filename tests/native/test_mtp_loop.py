"""The NPU engine's loop (`mtp::run`, ported to C++ in mtp_loop.cpp) holds the whole contract:
I1..I13 on every standard scenario, on the float32-exact toy, and F1 on every fault case.
mutants/c_loop/ mutates that file and runs this module: every mutant must fail it."""

from __future__ import annotations

import pytest

from pytest_onebit.native.suite import NativeLoopContract


class TestMtpLoop(NativeLoopContract):
    @pytest.fixture
    def loop(self, onebit_mtp_loop):
        return onebit_mtp_loop
