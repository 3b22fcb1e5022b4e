"""`load_mtp`: an MTP head from either kind of directory, a Qwen3-style MTP draft (mtp.py) or
a Qwen3.5 checkpoint with its own `mtp.*` layers (qwen3_5_mtp.py). It sits above both, so
that neither imports the other back: qwen3_5_mtp.py builds on mtp.py's layer, never the
reverse.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from onebit.heads import checkpoint, qwen3_5_mtp
from onebit.heads.mtp import MTPConfig, MTPDraft, MTPHead


def load_mtp(path: str | Path, target: object) -> MTPHead:
    """An MTP head on `target` from directory `path`, either
    - a Qwen3.5 / Qwen3-Next checkpoint with its own MTP weights (its config has
      `mtp_num_hidden_layers`, flat or under `text_config`): only its `mtp.*` tensors are
      read, from the shards that hold them (qwen3_5_mtp.py); or
    - a Qwen3-style MTP draft directory (config.json + *.safetensors; names may carry a
      `mtp.` or `model.mtp.` prefix)."""
    raw, source = checkpoint.read_config(path)
    if qwen3_5_mtp.has_own_mtp(raw):
        return qwen3_5_mtp.load_own_mtp(path, target, raw, source)
    config = MTPConfig.from_dict(raw, source)
    tensors = checkpoint.strip_prefix(checkpoint.read_tensors(path), ("model.mtp.", "mtp."))
    dtype = getattr(target, "dtype", np.float32)
    return MTPHead(MTPDraft(config, tensors, dtype, source=str(path)), target)
