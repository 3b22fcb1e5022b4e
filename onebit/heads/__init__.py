"""Draft heads: what guesses the base's next tokens.

- `NgramHead` (ngram.py): prompt lookup, no weights, one-pass;
- `DFlashHead` (dflash.py): a block-diffusion draft over the target's layer outputs, one-pass;
- `MTPHead` (mtp.py): an EAGLE-style layer over the target's hidden after t1, two-pass: a
  Qwen3-style MTP draft, or a Qwen3.5 checkpoint's own `mtp.*` layers (qwen3_5_mtp.py);
- `SuffixHead` (suffix.py): suffix decoding, drafts from what followed the text's longest
  repeated tail in the request and in a `SuffixCache` of recent answers, no weights, one-pass;
- `GreedyOracleHead` (oracle.py): the target's own greedy text, known in advance (the ceiling).

Each implements `onebit.DraftHead`. The weighted heads take their target (duck-typed, see
target.py) at construction: they embed with its embedding and score with its lm_head. The
heads know the protocols, not `onebit.models`.
"""

from onebit.heads.dflash import (
    DFlashDraft,
    DFlashHead,
    fabricate_dflash,
    load_dflash,
    tiny_dflash_config,
)
from onebit.heads.dflash_config import DFlashConfig, build_target_layer_ids
from onebit.heads.errors import DraftError, DraftFileError, DraftMismatchError
from onebit.heads.mtp import (
    MTPConfig,
    MTPDraft,
    MTPHead,
    fabricate_mtp,
    tiny_mtp_config,
)
from onebit.heads.mtp_load import load_mtp
from onebit.heads.ngram import NgramHead
from onebit.heads.oracle import GreedyOracleHead
from onebit.heads.qwen3_5_mtp import Qwen35MTPConfig, add_own_mtp, load_own_mtp
from onebit.heads.suffix import SuffixCache, SuffixHead, SuffixTree

__all__ = [
    "DFlashConfig",
    "DFlashDraft",
    "DFlashHead",
    "DraftError",
    "DraftFileError",
    "DraftMismatchError",
    "GreedyOracleHead",
    "MTPConfig",
    "MTPDraft",
    "MTPHead",
    "NgramHead",
    "Qwen35MTPConfig",
    "SuffixCache",
    "SuffixHead",
    "SuffixTree",
    "add_own_mtp",
    "build_target_layer_ids",
    "fabricate_dflash",
    "fabricate_mtp",
    "load_dflash",
    "load_mtp",
    "load_own_mtp",
    "tiny_dflash_config",
    "tiny_mtp_config",
]
