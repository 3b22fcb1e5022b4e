"""An alias kept for old command lines: the real-GGUF benchmark is now the second section of
`peer_ab.py` (its code in `peer_real.py`). This runs that section alone.

    .venv/bin/python benchmarks/real_model_ab.py [--model FILE.gguf] [--rounds 3]
                                                 [--tokens 40] [--threads 2]
                                                 [--skip-transformers]

is `peer_ab.py --no-fabricated` with the same options (`--skip-transformers` is
`--no-transformers`; every other peer_ab.py option passes through).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_ab  # noqa: E402  (beside this file)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = ["--no-transformers" if a == "--skip-transformers" else a for a in argv]
    if not any(a == "--rounds" or a.startswith("--rounds=") for a in argv):
        argv += ["--rounds", "3"]  # this script's old default
    peer_ab.main(["--no-fabricated", *argv])


if __name__ == "__main__":
    main()
