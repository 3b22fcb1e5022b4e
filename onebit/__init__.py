"""onebit: speculative decoding that emits exactly what plain greedy decoding emits.

The public face: the protocols a base model and a draft head implement, the loop `run()`,
the reference `greedy()`, and the errors. See `docs/contract.md` for the contract.
"""

from onebit.errors import (
    BaseContractError,
    ContractError,
    DecodeError,
    HeadContractError,
    PartError,
)
from onebit.fallback import Fallback
from onebit.loop import check_request, run
from onebit.params import DecodeParams
from onebit.processors import Processors
from onebit.protocols import BaseModel, DraftHead, Drafts, SamplingHead
from onebit.reference import greedy, sample
from onebit.result import RunResult, RunStats
from onebit.sampling import Rng, Sampling, SeededRng, warp


def load_model(path, **options):
    """Load a model directory (a Q4NX container or a HuggingFace checkpoint) as a `BaseModel`;
    see `onebit.models.load_model` for the options, `backend="host" | "torch" | "cuda" | "npu"`
    among them (docs/device.md). Imported on first use: the loop does not need the forward (or
    numba)."""
    from onebit.models import load_model as load

    return load(path, **options)


def generate(model, prompt, **options):
    """Text (or chat messages) in, text out through `run()`: returns a `Generation` that
    unpacks as `(text, run_result)`. See `onebit.text.generate.generate` for the keywords
    (`chat`, `system`, `max_tokens`, `head`, `k`, `sampling`, `seed`, `on_text`, ...) and
    docs/real-models.md. Imported on first use: the loop does not need the tokenizer."""
    from onebit.text.generate import generate as gen

    return gen(model, prompt, **options)


def generate_n(model, prompt, *, n: int, **options):
    """`n` independent answers to one prompt (a list of `Generation`): answer i is the one
    `generate` gives alone with `seed + i`. See `onebit.text.generate.generate_n`."""
    from onebit.text.generate import generate_n as gen_n

    return gen_n(model, prompt, n=n, **options)


__all__ = [
    "BaseContractError",
    "BaseModel",
    "ContractError",
    "DecodeError",
    "DraftHead",
    "Drafts",
    "Fallback",
    "HeadContractError",
    "PartError",
    "Processors",
    "DecodeParams",
    "RunResult",
    "Rng",
    "RunStats",
    "Sampling",
    "SamplingHead",
    "SeededRng",
    "check_request",
    "generate",
    "generate_n",
    "greedy",
    "load_model",
    "run",
    "sample",
    "warp",
]
__version__ = "0.1.0"
