"""Holding other engines' speculative decoding to the contract, black-box.

One protocol (`protocol.Peer`, `protocol.Arm`), one module per variant, one registry, as
pytest-xdist lays out its schedulers:

- `transformers_peer.TransformersPeer`: assisted generation, prompt lookup and speculative
  sampling on the history toy (`hf_toy`), and tiny real architectures (`hf_real`);
- `llama_cpp_peer.LlamaCppPeer`: llama-cpp-python's prompt lookup on SmolLM2's GGUF.

`run_peer(peer)` judges every arm and returns a `PeerReport` (check x arm).
"""

from __future__ import annotations

from pytest_onebit.peers.llama_cpp_peer import LlamaCppPeer
from pytest_onebit.peers.protocol import (
                                          FAILED,
                                          NOT_APPLICABLE,
                                          PASSED,
                                          Arm,
                                          Outcome,
                                          Peer,
                                          PeerFactory,
)
from pytest_onebit.peers.runner import PeerReport, run_peer
from pytest_onebit.peers.transformers_peer import TransformersPeer

#: The peers `onebit peer NAME` knows.
PEERS: dict[str, PeerFactory] = {"transformers": TransformersPeer, "llama_cpp": LlamaCppPeer}

__all__ = ["FAILED", "NOT_APPLICABLE", "PASSED", "PEERS", "Arm", "LlamaCppPeer", "Outcome",
           "Peer", "PeerReport", "TransformersPeer", "run_peer"]
