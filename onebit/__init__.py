"""onebit: speculative decoding that emits exactly what plain greedy decoding emits.

The public face: the protocols a base model and a draft head implement, the loop `run()`,
the reference `greedy()`, and the errors. See `design/loop.md` for the contract.
"""

from onebit.errors import BaseContractError, ContractError, HeadContractError
from onebit.loop import RunResult, RunStats, check_request, greedy, run
from onebit.protocols import BaseModel, DraftHead

__all__ = [
    "BaseContractError",
    "BaseModel",
    "ContractError",
    "DraftHead",
    "HeadContractError",
    "RunResult",
    "RunStats",
    "check_request",
    "greedy",
    "run",
]
__version__ = "0.1.0"
