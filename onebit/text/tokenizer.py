"""`Tokenizer`: text to token ids and back, built from GGUF metadata or a `tokenizer.json`.

The work is done by the `tokenizers` library; this class holds what a model's files say around
it (which ids are BOS, EOS and EOT, whether BOS is added, which tokens are special) and the
bytes each token stands for, which the streaming decoder needs. The face is the one users of
transformers know: `encode(text, add_special_tokens=...)`, `decode(ids, skip_special_tokens=...)`,
`bos_token_id`, `eos_token_id`.
"""

from __future__ import annotations

import json
from pathlib import Path

import tokenizers
from tokenizers import AddedToken

from onebit.text import bytelevel, sentencepiece
from onebit.text.errors import TokenizerError
from onebit.text.metadata import CONTROL, USER_DEFINED, VocabSpec, read_vocab

MAX_TOKENIZER_JSON = 256 * 1024 * 1024


class Tokenizer:
    """A model's tokenizer. Special-token text in the input (`<|im_start|>`) is parsed as the
    special token, as transformers does; `add_special_tokens` only decides BOS/EOS."""

    def __init__(self, backend: tokenizers.Tokenizer, *, pieces: list[bytes],
                 special_ids: dict[str, int], special: set[int], add_bos: bool = False,
                 add_eos: bool = False, strip_first_space: bool = False,
                 chat_template: str | None = None) -> None:
        self.backend = backend
        self._pieces = pieces
        self.special_ids = dict(special_ids)
        self.all_special_ids = frozenset(special)
        self.add_bos = add_bos and "bos" in special_ids
        self.add_eos = add_eos and "eos" in special_ids
        self.strip_first_space = strip_first_space
        self.chat_template = chat_template

    # construction --------------------------------------------------------------------------

    @classmethod
    def from_gguf_metadata(cls, metadata: dict) -> Tokenizer:
        """The tokenizer a GGUF's metadata describes (a dict of key -> str/int/float/bool/list)."""
        return _from_spec(read_vocab(metadata))

    @classmethod
    def from_file(cls, path: str | Path, config: dict | str | Path | None = None) -> Tokenizer:
        """A checkpoint's `tokenizer.json`, with its `tokenizer_config.json` (a path or the dict)
        for BOS/EOS and the chat template."""
        return _from_json(Path(path), config)

    # the transformers face -----------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def _id(self, name: str) -> int | None:
        return self.special_ids.get(name)

    bos_token_id = property(lambda self: self._id("bos"))
    eos_token_id = property(lambda self: self._id("eos"))
    eot_token_id = property(lambda self: self._id("eot"))
    pad_token_id = property(lambda self: self._id("pad"))
    unk_token_id = property(lambda self: self._id("unk"))

    def _token(self, name: str) -> str | None:
        token_id = self._id(name)
        return None if token_id is None else self.backend.id_to_token(token_id)

    bos_token = property(lambda self: self._token("bos"))
    eos_token = property(lambda self: self._token("eos"))

    @property
    def stop_ids(self) -> frozenset[int]:
        """The ids that end a generation: EOS, EOT (`<|eot_id|>`, `<|im_end|>`) and EOM."""
        return frozenset(self.special_ids[n] for n in ("eos", "eot", "eom")
                         if n in self.special_ids)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        ids = self.backend.encode(text, add_special_tokens=False).ids
        if add_special_tokens:
            if self.add_bos:
                ids = [self.special_ids["bos"], *ids]
            if self.add_eos:
                ids = [*ids, self.special_ids["eos"]]
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        ids = [self._check_id(i, "decode") for i in ids]
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": self.encode(text, add_special_tokens=add_special_tokens)}

    def __len__(self) -> int:
        return self.vocab_size

    # what the streaming decoder needs ------------------------------------------------------

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token `token_id` stands for in decoded text (a special token: its text)."""
        return self._pieces[self._check_id(token_id, "token_bytes")]

    def _check_id(self, token_id, where: str) -> int:
        if isinstance(token_id, bool) or not isinstance(token_id, int) and not hasattr(
                token_id, "__index__"):
            raise TypeError(f"{where}: token id {token_id!r} is not an int")
        token_id = int(token_id)
        if not 0 <= token_id < len(self._pieces):
            raise ValueError(f"{where}: token id {token_id} is outside the vocabulary "
                             f"of {len(self._pieces)}")
        return token_id

    def stream(self, skip_special_tokens: bool = False):
        """A `StreamDecoder` over this tokenizer."""
        from onebit.text.stream import StreamDecoder

        return StreamDecoder(self, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages, *, add_generation_prompt: bool = True,
                            tokenize: bool = False, template: str | None = None, **extra):
        """Render `messages` with the model's chat template (or `template`); the ids with
        `tokenize=True`. See `onebit.text.chat`."""
        from onebit.text.chat import render

        text = render(template or self.chat_template, messages,
                      add_generation_prompt=add_generation_prompt,
                      bos_token=self.bos_token or "", eos_token=self.eos_token or "", **extra)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def __repr__(self) -> str:
        return (f"Tokenizer(vocab_size={self.vocab_size}, bos={self.bos_token_id}, "
                f"eos={self.eos_token_id}, stop={sorted(self.stop_ids)})")


def _from_spec(spec: VocabSpec) -> Tokenizer:
    tokens = spec.tokens
    special = {i for i, t in enumerate(spec.token_types) if t == CONTROL}
    special |= set(spec.special_ids.values())
    if spec.model == "gpt2":
        backend = bytelevel.build(tokens, spec.merges, spec.pre)
        pieces = [bytelevel.token_bytes(t) for t in tokens]
        # a control token spelled outside the byte alphabet is one llama.cpp mislabelled: it
        # cannot come out of the merges, and matching it in text would add a token the model
        # never saw as text (transformers skips these too)
        alphabet = bytelevel.byte_of_char()
        special = {i for i in special if all(c in alphabet for c in tokens[i])}
        spelled = bytelevel.spell
    else:
        unk = spec.special_ids.get("unk")
        backend = sentencepiece.build(tokens, spec.scores, spec.add_space_prefix,
                                      tokens[unk] if unk is not None else None)
        pieces = [_spm_bytes(t) for t in tokens]
        spelled = str
    for i in special:   # special tokens decode to their text, as transformers prints them
        pieces[i] = tokens[i].encode("utf-8")
    backend.add_special_tokens([AddedToken(spelled(tokens[i]), normalized=False, special=True)
                                for i in sorted(special)])
    # USER_DEFINED tokens (`<think>`) are matched whole in text but are not special
    user = [AddedToken(spelled(t), normalized=False, special=False)
            for t, kind in zip(tokens, spec.token_types, strict=True) if kind == USER_DEFINED]
    if user:
        backend.add_tokens(user)
    return Tokenizer(backend, pieces=pieces, special_ids=_with_eot(spec.special_ids, tokens),
                     special=special, add_bos=spec.add_bos, add_eos=spec.add_eos,
                     strip_first_space=spec.model == "llama" and spec.add_space_prefix,
                     chat_template=spec.chat_template)


# Files that predate `tokenizer.ggml.eot_token_id` still end a chat turn with one of these.
_EOT_TEXTS = ("<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<end_of_turn>", "<|end|>")


def _with_eot(special_ids: dict[str, int], tokens: list[str]) -> dict[str, int]:
    ids = dict(special_ids)
    if "eot" not in ids:
        for i, token in enumerate(tokens):
            if token in _EOT_TEXTS and i != ids.get("eos"):
                ids["eot"] = i
                break
    return ids


def _spm_bytes(piece: str) -> bytes:
    byte = sentencepiece.byte_of_piece(piece)
    if byte is not None:
        return bytes([byte])
    return piece.replace(sentencepiece.SPACE, " ").encode("utf-8")


def _read_json(path: Path, what: str) -> dict:
    try:
        size = path.stat().st_size
    except OSError as e:
        raise TokenizerError(f"{what} {path}: {e.strerror}") from None
    if size > MAX_TOKENIZER_JSON:
        raise TokenizerError(f"{what} {path} is {size} bytes (limit {MAX_TOKENIZER_JSON})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerError(f"{what} {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise TokenizerError(f"{what} {path} is a JSON {type(data).__name__}, not an object")
    return data


def _decoder_types(node) -> set[str]:
    if not isinstance(node, dict):
        return set()
    found = {node.get("type")}
    for child in node.get("decoders") or ():
        found |= _decoder_types(child)
    return found


def _config_token(config: dict, key: str) -> str | None:
    value = config.get(key)
    if isinstance(value, dict):     # {"content": "<s>", ...}, as older configs write it
        value = value.get("content")
    return value if isinstance(value, str) else None


def _from_json(path: Path, config) -> Tokenizer:
    data = _read_json(path, "tokenizer.json")
    if isinstance(config, str | Path):
        config = _read_json(Path(config), "tokenizer_config.json")
    config = dict(config or {})
    try:
        backend = tokenizers.Tokenizer.from_str(json.dumps(data))
    except Exception as e:  # the library raises its own Exception for any malformed part
        raise TokenizerError(f"tokenizer.json {path}: {e}") from None
    kinds = _decoder_types(data.get("decoder"))
    size = backend.get_vocab_size(with_added_tokens=True)
    texts = [backend.id_to_token(i) or "" for i in range(size)]
    if "ByteLevel" in kinds:
        pieces = [bytelevel.token_bytes(t) for t in texts]
    elif "ByteFallback" in kinds or "Metaspace" in kinds or "Replace" in kinds:
        pieces = [_spm_bytes(t) for t in texts]
    else:
        raise TokenizerError(f"tokenizer.json {path}: decoder {sorted(map(str, kinds))} is "
                             "neither byte-level nor SentencePiece")
    special = {a["id"] for a in data.get("added_tokens") or () if a.get("special")}
    for i in special:
        if 0 <= i < size:
            pieces[i] = texts[i].encode("utf-8")
    ids = {}
    for name in ("bos", "eos", "pad", "unk"):
        text = _config_token(config, f"{name}_token")
        if text is not None and backend.token_to_id(text) is not None:
            ids[name] = backend.token_to_id(text)
    template = config.get("chat_template")
    return Tokenizer(backend, pieces=pieces, special_ids=_with_eot(ids, texts), special=special,
                     add_bos=bool(config.get("add_bos_token", False)),
                     add_eos=bool(config.get("add_eos_token", False)),
                     strip_first_space="Strip" in kinds,
                     chat_template=template if isinstance(template, str) else None)
