"""`Tokenizer`: text to token ids and back, built from GGUF metadata or a `tokenizer.json`.

From a GGUF file, the tokenizer is llama.cpp's, reimplemented (llama-vocab.cpp at build 11434):
special tokens are cut out of the text first (special.py), each stretch between them goes to the
vocabulary type's own algorithm (sentencepiece.py, bytelevel.py with pretokenizers.py,
wordpiece.py, unigram.py, rwkv.py), and BOS/EOS/SEP are added by the type's rules, with
llama.cpp's defaults where the file says nothing. tests/text/test_golden_ids.py holds every
type to the ids llama.cpp itself gives on a corpus of hard text. From a `tokenizer.json`,
HuggingFace's `tokenizers` runs the file's own pipeline.

The face is the one users of transformers know: `encode(text, add_special_tokens=...)`,
`decode(ids, skip_special_tokens=...)`, `bos_token_id`, `eos_token_id`; `parse_special=False`
keeps special-token text typed by a user as text, as llama.cpp's `parse_special` does.
Decoding joins the bytes of the tokens, so `decode(encode(text))` gives the text back (less the
space SentencePiece puts in front, which decode takes off again).
"""

from __future__ import annotations

import json
from pathlib import Path

import tokenizers
from tokenizers import AddedToken

from onebit.text import bytelevel, sentencepiece
from onebit.text.errors import TokenizerError
from onebit.text.fragments import FragmentEncoder
from onebit.text.metadata import CONTROL, USER_DEFINED, VocabSpec, read_vocab
from onebit.text.special import (
    ATTR_BYTE,
    ATTR_CONTROL,
    ATTR_NORMAL,
    ATTR_UNKNOWN,
    ATTR_USER_DEFINED,
    SpecialToken,
    partition,
    special_tokens,
    token_attributes,
)

MAX_TOKENIZER_JSON = 256 * 1024 * 1024


class _GGUFText:
    """llama.cpp's two passes: the special-token partition, then the type's encoder."""

    def __init__(self, encoder: FragmentEncoder, specials: list[SpecialToken]):
        self.encoder = encoder
        self.specials = specials

    def encode(self, text: str, parse_special: bool) -> list[int]:
        ids: list[int] = []
        first = True            # the stretch opens the text or follows a special token
        for piece in partition(text, self.specials, parse_special):
            if isinstance(piece, int):
                ids.append(piece)
                first = True
            else:
                ids.extend(self.encoder.encode(piece, first=first))
                first = False
        return ids


class _JSONText:
    """A tokenizer.json's own pipeline, special tokens and all, through `tokenizers`."""

    def __init__(self, backend: tokenizers.Tokenizer):
        self.backend = backend

    def encode(self, text: str, parse_special: bool) -> list[int]:
        self.backend.encode_special_tokens = not parse_special
        return self.backend.encode(text, add_special_tokens=False).ids


class Tokenizer:
    """A model's tokenizer. Special-token text in the input (`<|im_start|>`) is parsed as the
    special token unless `parse_special=False`; `add_special_tokens` decides BOS/EOS/SEP."""

    def __init__(self, text, *, tokens: list[str], pieces: list[bytes],
                 special_ids: dict[str, int], special: set[int], add_bos: bool = False,
                 add_eos: bool = False, add_sep: bool = False, strip_first_space: bool = False,
                 chat_template: str | None = None, json_form=None) -> None:
        self._text = text
        self._tokens = tokens
        self._ids = {t: i for i, t in enumerate(tokens)}
        self._pieces = pieces
        self.special_ids = dict(special_ids)
        self.all_special_ids = frozenset(special)
        self.add_bos = add_bos and "bos" in special_ids
        self.add_eos = add_eos and "eos" in special_ids
        self.add_sep = add_sep and "sep" in special_ids
        self.strip_first_space = strip_first_space
        self.chat_template = chat_template
        self._json_form = json_form

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

    def save_json(self, path: str | Path) -> None:
        """Write this tokenizer as a `tokenizer.json` that `from_file` (and transformers) read
        back to the same ids. Byte-level BPE vocabularies only: SentencePiece's merge order
        depends on where pairs stand, which a tokenizer.json cannot say."""
        if self._json_form is None:
            raise TokenizerError("this tokenizer has no tokenizer.json form (only byte-level "
                                 "BPE vocabularies do)")
        self._json_form().save(str(path))

    # the transformers face -----------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def token_to_id(self, token: str) -> int | None:
        """The id of the token spelled `token` in the vocabulary (as stored), or None."""
        return self._ids.get(token)

    def id_to_token(self, token_id: int) -> str:
        return self._tokens[self._check_id(token_id, "id_to_token")]

    def _id(self, name: str) -> int | None:
        return self.special_ids.get(name)

    bos_token_id = property(lambda self: self._id("bos"))
    eos_token_id = property(lambda self: self._id("eos"))
    eot_token_id = property(lambda self: self._id("eot"))
    pad_token_id = property(lambda self: self._id("pad"))
    unk_token_id = property(lambda self: self._id("unk"))
    sep_token_id = property(lambda self: self._id("sep"))

    def _token(self, name: str) -> str | None:
        token_id = self._id(name)
        return None if token_id is None else self._tokens[token_id]

    bos_token = property(lambda self: self._token("bos"))
    eos_token = property(lambda self: self._token("eos"))

    @property
    def stop_ids(self) -> frozenset[int]:
        """The ids that end a generation: EOS, EOT (`<|eot_id|>`, `<|im_end|>`) and EOM."""
        return frozenset(self.special_ids[n] for n in ("eos", "eot", "eom")
                         if n in self.special_ids)

    def encode(self, text: str, add_special_tokens: bool = True, *,
               parse_special: bool = True) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        ids = self._text.encode(text, parse_special)
        if add_special_tokens:
            if self.add_bos:
                ids = [self.special_ids["bos"], *ids]
            if self.add_eos:
                ids = [*ids, self.special_ids["eos"]]
            if self.add_sep:
                ids = [*ids, self.special_ids["sep"]]
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        ids = [self._check_id(i, "decode") for i in ids]
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.all_special_ids]
        text = b"".join(self._pieces[i] for i in ids).decode("utf-8", errors="replace")
        if self.strip_first_space and text.startswith(" "):
            text = text[1:]
        return text

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


# llama.cpp's special ids where a file names none, per type (llama-vocab.cpp, `load`); an id
# outside the vocabulary is dropped, as llama.cpp disables it
_DEFAULT_IDS = {
    "llama": {"bos": 1, "eos": 2, "unk": 0},
    "gpt2": {"bos": 11, "eos": 11},
    "gemma4": {},
    "bert": {"bos": 101, "unk": 100, "sep": 102, "pad": 0, "mask": 103},
    "t5": {"eos": 1, "unk": 2, "pad": 0},
    "rwkv": {},
}


def _encoder(spec: VocabSpec):
    """The type's FragmentEncoder, and what the type decides: llama.cpp's BOS/EOS defaults,
    whether a space is put in front, whether BPE text is byte-encoded."""
    how = {"add_bos": False, "add_eos": False, "space_prefix": False, "byte_encode": True,
           "has_bos": True}
    if spec.model in ("gpt2", "gemma4"):
        pre = bytelevel.pre_tokenizer(spec.pre, spec.model)
        how.update(add_bos=pre.add_bos, byte_encode=pre.byte_encode, has_bos=pre.has_bos)
        return bytelevel.BPEEncoder(spec.tokens, spec.merges or [], pre), how
    if spec.model == "llama":
        space = True if spec.add_space_prefix is None else spec.add_space_prefix
        how.update(add_bos=True, space_prefix=space)
        return sentencepiece.SentencePieceEncoder(spec.tokens, spec.scores,
                                                  add_space_prefix=space), how
    if spec.model == "bert":
        from onebit.text import wordpiece

        how.update(add_bos=True)
        return wordpiece.build(spec), how
    if spec.model == "rwkv":
        from onebit.text import rwkv

        return rwkv.build(spec), how
    from onebit.text import unigram  # "t5": read_vocab let no other name through

    # llama.cpp's default for a Unigram file that does not say is no space prefix
    how.update(add_eos=True, space_prefix=bool(spec.add_space_prefix))
    return unigram.build(spec), how


def _special_ids(spec: VocabSpec, has_bos: bool) -> dict[str, int]:
    ids = {name: i for name, i in _DEFAULT_IDS[spec.model].items() if i < len(spec.tokens)}
    if not has_bos:
        ids.pop("bos", None)
    ids.update(spec.special_ids)
    return _with_eot(ids, spec.tokens)


def _pieces(spec: VocabSpec, attrs: list[int], byte_encode: bool,
            encoder: FragmentEncoder) -> list[bytes]:
    """The bytes each token prints, as llama.cpp's `token_to_piece` gives them: a special or
    user-defined token its text, a byte token its byte, a normal token its text with "▁" as a
    space (or, byte-level, its bytes); a token of any other type prints nothing. RWKV: every
    token its unescaped bytes, whatever its type (the encoder has them)."""
    if spec.model == "rwkv":
        return list(encoder.pieces)
    pieces = []
    for text, attr in zip(spec.tokens, attrs, strict=True):
        if attr & (ATTR_CONTROL | ATTR_UNKNOWN | ATTR_USER_DEFINED):
            pieces.append(text.encode("utf-8"))
        elif attr & ATTR_BYTE and sentencepiece.byte_of_piece(text) is not None:
            pieces.append(bytes([sentencepiece.byte_of_piece(text)]))
        elif attr & (ATTR_NORMAL | ATTR_BYTE):
            if spec.model in ("gpt2", "gemma4") and byte_encode:
                pieces.append(bytelevel.token_bytes(text))
            else:
                pieces.append(text.replace(sentencepiece.SPACE, " ").encode("utf-8"))
        else:
            pieces.append(b"")
    return pieces


def _from_spec(spec: VocabSpec) -> Tokenizer:
    encoder, how = _encoder(spec)
    special_ids = _special_ids(spec, how["has_bos"])
    add_bos = how["add_bos"] if spec.add_bos is None else spec.add_bos
    if spec.model == "gemma4":
        add_bos = True      # llama.cpp overrides Gemma 4's files, which say false
    add_eos = how["add_eos"] if spec.add_eos is None else spec.add_eos
    if spec.model == "rwkv":    # llama.cpp's RWKV tokenize adds neither, whatever the file says
        add_bos = add_eos = False
    attrs = token_attributes(spec)
    # decode drops what llama.cpp's `token_to_piece(special=False)` drops: CONTROL and UNKNOWN
    # tokens, and the ids the file names as BOS/EOS/... (not for RWKV, whose converter names
    # the normal token "\n\n" as EOT: decode keeps it, as llama.cpp does)
    special = {i for i, attr in enumerate(attrs) if attr & (ATTR_CONTROL | ATTR_UNKNOWN)}
    if spec.model != "rwkv":
        special |= {i for name, i in special_ids.items() if name != "unk"}
    json_form = None
    if spec.model == "gpt2":
        json_form = lambda: _json_form(encoder, spec)   # noqa: E731 - built only when saved
    pieces = _pieces(spec, attrs, how["byte_encode"], encoder)
    return Tokenizer(_GGUFText(encoder, special_tokens(spec, attrs)), tokens=spec.tokens,
                     pieces=pieces, special_ids=special_ids, special=special,
                     add_bos=add_bos, add_eos=add_eos,
                     add_sep=spec.model == "bert", strip_first_space=how["space_prefix"],
                     chat_template=spec.chat_template, json_form=json_form)


def _json_form(encoder: bytelevel.BPEEncoder, spec: VocabSpec) -> tokenizers.Tokenizer:
    """The byte-level BPE pipeline with its special and user-defined tokens, as `tokenizers`
    saves it (for a checkpoint folder made from a GGUF)."""
    from tokenizers import decoders

    tok = tokenizers.Tokenizer.from_str(encoder.backend_json())
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(spec.tokens[i], normalized=False, special=True)
                            for i, kind in enumerate(spec.token_types) if kind == CONTROL])
    user = [AddedToken(spec.tokens[i], normalized=False, special=False)
            for i, kind in enumerate(spec.token_types) if kind == USER_DEFINED]
    if user:
        tok.add_tokens(user)
    return tok


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
    return Tokenizer(_JSONText(backend), tokens=texts, pieces=pieces,
                     special_ids=_with_eot(ids, texts), special=special,
                     add_bos=bool(config.get("add_bos_token", False)),
                     add_eos=bool(config.get("add_eos_token", False)),
                     strip_first_space="Strip" in kinds,
                     chat_template=template if isinstance(template, str) else None,
                     json_form=lambda: backend)
