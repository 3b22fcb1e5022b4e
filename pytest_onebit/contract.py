"""The loop's conformance contract in one import (the names tests and users have always used).

The parts live in their own modules: `scenarios` (what a loop is run on), `trace` (running it
and what it left behind), `checks` (I1..I13), `conformance` (`check_loop` and its report) and
`loader` (`MODULE:FUNC` specs).
"""

from pytest_onebit.checks import CHECKS, Check, check, run_check
from pytest_onebit.conformance import (
    ContractReport,
    Finding,
    LoopContractError,
    check_loop,
    check_trace,
)
from pytest_onebit.loader import LoadError, load_loop
from pytest_onebit.scenarios import DEFAULT_PROMPT, Scenario, arm_scenarios, standard_scenarios
from pytest_onebit.trace import RunFn, Trace, execute, stopper

__all__ = [
    "CHECKS",
    "DEFAULT_PROMPT",
    "Check",
    "ContractReport",
    "Finding",
    "LoadError",
    "LoopContractError",
    "RunFn",
    "Scenario",
    "Trace",
    "arm_scenarios",
    "check",
    "check_loop",
    "check_trace",
    "execute",
    "load_loop",
    "run_check",
    "standard_scenarios",
    "stopper",
]
