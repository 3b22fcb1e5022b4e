"""The history toy as a transformers model: onebit's toy base behind `PreTrainedModel`, and
assistants that are perfect, always wrong, or right on every other position.

transformers' assisted decoding feeds a model only the tokens its cache has not seen, so a
model whose logits depend on the whole history must read that history back from its cache.
The toy stores each token id (and its position) as a one-wide key through `cache.update()`,
and folds the whole (token, position) history into the toy's hash for every output row. A
wrong crop of the cache (a rejected draft left in, an accepted one cut) or a wrong position
changes every later logit, so the text shows it.

transformers 5.24 renamed the output field and keyword `past_key_values` to `cache`; the
model accepts both and answers in the spelling the installed release uses.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from pytest_onebit.doubles.toy import ToyBase, mix

#: The output field (and keyword) that carries the cache in the installed transformers.
CACHE_FIELD = ("cache" if "cache" in {f.name for f in dataclasses.fields(CausalLMOutputWithPast)}
               else "past_key_values")

#: What an assistant knows: perfect (the target's own choice), garbage (never it), half
#: (the target's choice for a token at an even position, a wrong one at an odd position),
#: swapped (the target's logits with its two likeliest tokens trading places: under top-k 2
#: its q lives on the same two tokens as p, ranked the other way, so a sampled round accepts
#: often, rejects often, and on a rejection the residual max(0, p - q) is far from p).
#: "bigram" is a target of its own whose logits depend on the last token only: its text
#: repeats, so prompt lookup finds drafts that are accepted.
FLAVOURS = ("target", "perfect", "garbage", "half", "swapped", "bigram")

#: One printable character per token id, so stop strings have text to match.
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-"


class ToyConfig(PretrainedConfig):
    model_type = "onebit_toy"

    def __init__(self, vocab_size: int = 64, hidden: int = 16, seed: int = 0,
                 flavour: str = "target", **kwargs) -> None:
        if flavour not in FLAVOURS:
            raise ValueError(f"ToyConfig flavour must be one of {FLAVOURS}, got {flavour!r}")
        self.hidden = hidden
        self.seed = seed
        self.flavour = flavour
        kwargs.setdefault("num_hidden_layers", 1)
        kwargs.setdefault("use_cache", True)
        super().__init__(vocab_size=vocab_size, **kwargs)
        self.vocab_size = vocab_size


class ToyForCausalLM(PreTrainedModel, GenerationMixin):
    """onebit's toy base as a causal LM whose only memory is its cache."""

    config_class = ToyConfig
    base_model_prefix = "toy"
    main_input_name = "input_ids"
    _supports_cache_class = True

    def __init__(self, config: ToyConfig) -> None:
        super().__init__(config)
        # A parameter, so that transformers can tell the model's device and dtype.
        self.anchor = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        self.toy = ToyBase(vocab_size=config.vocab_size, hidden=config.hidden, seed=config.seed)
        self.post_init()

    def _init_weights(self, module) -> None:  # nothing random to initialise
        pass

    def get_input_embeddings(self):
        return None

    def history_logits(self, tokens: list[int]) -> np.ndarray:
        """`[len(tokens), V]`: row i is the toy's logits after tokens[0..i] at positions
        0..i (the state folds every earlier token in), bent by the flavour."""
        rows, state = [], 0
        bigram = self.config.flavour == "bigram"
        for pos, token in enumerate(tokens):
            state = mix(0, token, 0) if bigram else mix(state, token, pos)
            rows.append(self.toy.logits_of(self.toy.hidden_of(state)))
        logits = np.stack(rows)
        flavour = self.config.flavour
        wrong = np.roll(logits, 1, axis=-1)  # argmax moves one id up: never the target's
        if flavour == "garbage":
            return wrong
        if flavour == "swapped":
            rows = np.arange(len(logits))[:, None]
            top = np.argsort(-logits, axis=-1, kind="stable")[:, :2]
            logits[rows, top] = logits[rows, top[:, ::-1]]
            return logits
        if flavour == "half":
            predicts = np.arange(len(tokens)) + 1  # row i predicts the token at position i + 1
            odd = predicts % 2 == 1
            logits[odd] = wrong[odd]
        return logits

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None,
                cache=None, use_cache=None, **kwargs):
        store = cache if cache is not None else past_key_values
        if store is None:  # no cache asked for: the input is the whole history
            histories = input_ids.tolist()
            new = input_ids.shape[1]
        else:
            past = store.get_seq_length()
            batch, new = input_ids.shape
            ids = input_ids.to(torch.float64)
            pos = torch.arange(past, past + new, dtype=torch.float64).expand(batch, new)
            # one head, one channel: [B, H, T, D]
            keys, values = store.update(ids.view(batch, 1, new, 1),
                                        pos.reshape(batch, 1, new, 1), 0)
            histories = [self._read_back(keys[b, 0, :, 0], values[b, 0, :, 0])
                         for b in range(batch)]
        rows = [self.history_logits(h)[-new:] for h in histories]
        logits = torch.from_numpy(np.stack(rows))
        return CausalLMOutputWithPast(logits=logits, **{CACHE_FIELD: store})

    @staticmethod
    def _read_back(keys: torch.Tensor, values: torch.Tensor) -> list[int]:
        """The token history a cache holds; a token stored at a position other than its index
        (a cache that lost or repeated a position) is flipped, so the text shows it."""
        history = [int(t) for t in keys.tolist()]
        stored = [int(p) for p in values.tolist()]
        return [t ^ 1 if p != i else t for i, (t, p) in enumerate(zip(history, stored,
                                                                         strict=True))]


def toy_model(flavour: str = "target", vocab_size: int = 64, seed: int = 0) -> ToyForCausalLM:
    config = ToyConfig(vocab_size=vocab_size, seed=seed, flavour=flavour,
                       eos_token_id=None, bos_token_id=None, pad_token_id=vocab_size - 1)
    return ToyForCausalLM(config).eval()


def toy_tokenizer(vocab_size: int = 64):
    """A character-level tokenizer over the toy's ids (id i is ALPHABET[i]), for stop
    strings: `generate(stop_strings=..., tokenizer=...)` needs one."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if vocab_size > len(ALPHABET):
        raise ValueError(f"toy_tokenizer covers {len(ALPHABET)} ids, asked for {vocab_size}")
    vocab = {ALPHABET[i]: i for i in range(vocab_size)}
    inner = Tokenizer(models.WordLevel(vocab=vocab, unk_token=ALPHABET[0]))
    inner.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    inner.decoder = decoders.Fuse()  # tokens join with nothing between them
    return PreTrainedTokenizerFast(tokenizer_object=inner, pad_token=ALPHABET[vocab_size - 1])


def half_right(pos: int) -> bool:
    """Whether the half assistant drafts the target's token at `pos`."""
    return pos % 2 == 0


def text_of(tokens: list[int]) -> str:
    return "".join(ALPHABET[t] for t in tokens)
