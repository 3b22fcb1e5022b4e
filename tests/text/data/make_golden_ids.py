"""Make tests/text/data/golden_ids.json.gz: llama.cpp's own token ids for the corpus.

    python tests/text/data/make_golden_ids.py [MODELS_DIR]

The reference is llama.cpp itself, through llama-cpp-python (`Llama(vocab_only=True)` then
`tokenize`), on the vocabulary files of llama.cpp's corpus (`onebit pull llama.cpp-corpus`;
MODELS_DIR defaults to the cached one). For every vocabulary and every string of
tokenizer_corpus.jsonl (and of the vocabulary's own llama.cpp test strings, its `.inp` file)
it records the ids with add_special and parse_special both off ("plain") and both on
("special").

The corpus holds one file per tokenizer type, not one per pre-tokenizer name, so each
pre-tokenizer onebit knows is also held to llama.cpp on one vocabulary: GPT-2's vocabulary
written to a new GGUF under that name, which llama.cpp then cuts by that name's expressions.
Names that behave alike are one entry (the first name, alphabetically, stands for them).

No RWKV ("world") vocabulary is in the corpus, so one is made here (`rwkv_vocab`, which
tests/text/test_golden_ids.py calls too): the converter's spelling of escaped byte tokens,
overlapping prefixes, other legal spellings of the same bytes, special tokens, and all single
bytes but a few, once with an unknown token and once without; llama.cpp's ids for both are
stored under "synthetic".

The output records the llama-cpp-python version that made it. Rerun this script when the
corpus, the pinned llama.cpp build or the corpus strings change; tests/text/test_golden_ids.py
reads the file and needs no llama.cpp.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "golden_ids.json.gz"
BASE_FOR_PRE = "gpt-2"   # the vocabulary each pre-tokenizer name is written onto


def corpus() -> list[str]:
    lines = (HERE / "tokenizer_corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def own_strings(vocab: Path) -> list[str]:
    """The vocabulary's own test strings (llama.cpp's `.inp`), if it has them."""
    inp = vocab.with_name(vocab.name + ".inp")
    if not inp.is_file():
        return []
    return inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")


def ids_of(path: Path, texts: list[str]) -> dict[str, list[list[int]]]:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    out = {"plain": [], "special": []}
    for text in texts:
        data = text.encode("utf-8")
        out["plain"].append(llm.tokenize(data, add_bos=False, special=False))
        out["special"].append(llm.tokenize(data, add_bos=True, special=True))
    return out


def metadata(path: Path) -> dict:
    import gguf

    reader = gguf.GGUFReader(str(path))
    return {key: field.contents() for key, field in reader.fields.items()
            if not key.startswith("GGUF.")}


def _finish(writer) -> None:
    """Write out a GGUF that holds metadata only."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_with_pre(meta: dict, pre: str, path: Path) -> None:
    """A vocabulary-only GGUF: `meta`'s tokenizer under pre-tokenizer name `pre`."""
    import gguf

    writer = gguf.GGUFWriter(str(path), meta.get("general.architecture", "gpt2"))
    writer.add_tokenizer_model(meta["tokenizer.ggml.model"])
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(meta["tokenizer.ggml.tokens"])
    writer.add_token_types(meta["tokenizer.ggml.token_type"])
    writer.add_token_merges(meta["tokenizer.ggml.merges"])
    for key, add in (("bos_token_id", writer.add_bos_token_id),
                     ("eos_token_id", writer.add_eos_token_id)):
        if "tokenizer.ggml." + key in meta:
            add(meta["tokenizer.ggml." + key])
    _finish(writer)


# The single bytes the made RWKV vocabulary leaves out: each occurs in the corpus (BEL, "~",
# the lead byte of U+4000..U+4FFF, the lead byte of emoji) and none starts a longer token
# (where one does, llama.cpp's RWKV session loops forever; onebit's rwkv.py says so).
RWKV_MISSING_BYTES = frozenset((0x07, 0x7E, 0xE4, 0xF0))

# The texts of the made RWKV vocabulary's longer tokens, each stored in the converter's spelling
RWKV_TEXTS = [
    # whitespace runs and line ends
    "  ", "   ", "    ", "        ", "\t\t", "\n\n", "\n\n\n", " \n", "\r\n", " \r\n",
    "\n    ", "\n\t",
    # overlapping prefixes: "abc" after "ab" after "a"; "xyz" with no "xy" on the way
    "ab", "abc", "abcd", "abd", "xyz", "xyzw", "x1", "x1y", "x1y2z3",
    # code and English
    "the", " the", "in", "int", "integer", " in", " int", "return", " return", "def", "def ",
    "for", " for", "import", " import", "print", "print(", "range(", "range(1", "(x)", "**",
    "++", "==", " = ", "->", "=>", "</", "<div", "class", " class", "self", "__", "___",
    "__init__", "lambda", " lambda", "None", "True", "False", "np.", "numpy", " as ", "pass",
    "try:", "except", "hello", " hello", "Hello", "world", " world", "ing", "tion", "er", "e ",
    " a", "a b", "mixed", " mixed", " English", "leading", "trailing", "bottles",
    # digits
    "00", "000", "12", "123", "1234", "3.14", " 1", " 12", "1,000", "2024", "-0", "99",
    # quotes and backslashes, which the converter's spelling escapes
    "'s", '"key"', "'\"", "\\n", "\\\\", 'printf("',
    # UTF-8 (the converter spells every byte from 0x80 up as \xNN)
    "é", "café", "ß", "ñ", "É", "ü", "ö", "Ångström", "Dvořák", "Łódź", "São",
    "Ελλ", "ηνικά", "Рус", "ский", " язык", "日本", "日本語", "語", "テキスト", "한국어",
    "\u00a0", "\u3000", "\u200d", "١٢", "१२३",
]
# Tokens spelled otherwise than the converter does, with the bytes llama.cpp reads in them
RWKV_OTHER_SPELLINGS = [
    ("na\u00efve", "naïve".encode()),           # raw UTF-8, not escaped
    ("Stra\u00dfe", "Straße".encode()),
    ("\\p\\a\\s\\s", b"pass"),                 # a backslash before a letter is the letter
    ("\\'\\\"\\(", b"'\"("),                    # and before a quote or a bracket
    ("\\x48\\x65\\x6c\\x6c\\x6f", b"Hello"),    # bytes of an earlier token: this later id
                                                # is the one matched (so is "pass" above)
    ("\\xe6\\x97", "日".encode()[:2]),           # the first two bytes of a character
]


def rwkv_token(data: bytes) -> str:
    """`data` spelled as llama.cpp's converter spells an RWKV token: `repr(data)[2:-1]`."""
    return repr(data)[2:-1]


def rwkv_vocab(unk: bool = True) -> dict:
    """The GGUF metadata of a made RWKV "world" vocabulary (see the module docstring): "<s>"
    (CONTROL, BOS and EOS, as the converter makes it), the single bytes but RWKV_MISSING_BYTES,
    RWKV_TEXTS in the converter's spelling, RWKV_OTHER_SPELLINGS, special tokens of each
    type, "\\n\\n" as EOT (the converter's hack) and unused "[PAD<i>]" tokens. The file
    says add_bos and add_eos, which llama.cpp's RWKV ignores. With `unk`, "<unk>" is the
    unknown token, which the missing bytes become; without, llama.cpp gives -1 for them."""
    singles = [rwkv_token(bytes([b])) for b in range(256) if b not in RWKV_MISSING_BYTES]
    longer = [rwkv_token(text.encode("utf-8")) for text in RWKV_TEXTS]
    other = [spelling for spelling, _ in RWKV_OTHER_SPELLINGS]
    tokens, types = ["<s>"], [3]
    for group, kind in ((singles, 1), (longer, 1), (other, 1),
                        (["<|im_start|>", "<|im_end|>"], 3), (["<think>"], 4),
                        (["<|endoftext|>"], 1)):     # NORMAL, made CONTROL by llama.cpp
        tokens += group
        types += [kind] * len(group)
    if unk:
        tokens.append("<unk>")
        types.append(2)
    for i in range(len(tokens), len(tokens) + 4):
        tokens.append(f"[PAD{i}]")
        types.append(5)
    assert len(set(tokens)) == len(tokens)
    firsts = [t.encode("utf-8")[0] for t in RWKV_TEXTS] + [b[0] for _, b in RWKV_OTHER_SPELLINGS]
    assert not RWKV_MISSING_BYTES.intersection(firsts)
    meta = {
        "general.architecture": "rwkv6",
        "tokenizer.ggml.model": "rwkv",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": 0,
        "tokenizer.ggml.eos_token_id": 0,
        "tokenizer.ggml.eot_token_id": tokens.index(rwkv_token(b"\n\n")),
        "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": True,
    }
    if unk:
        meta["tokenizer.ggml.unknown_token_id"] = tokens.index("<unk>")
    return meta


def write_rwkv(meta: dict, path: Path) -> None:
    """`rwkv_vocab`'s metadata as a vocabulary-only GGUF (llama.cpp reads no hyperparameters
    of a vocab_only load)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), meta["general.architecture"])
    writer.add_tokenizer_model(meta["tokenizer.ggml.model"])
    writer.add_token_list(meta["tokenizer.ggml.tokens"])
    writer.add_token_types(meta["tokenizer.ggml.token_type"])
    for key, add in (("bos_token_id", writer.add_bos_token_id),
                     ("eos_token_id", writer.add_eos_token_id),
                     ("eot_token_id", writer.add_eot_token_id),
                     ("unknown_token_id", writer.add_unk_token_id),
                     ("add_bos_token", writer.add_add_bos_token),
                     ("add_eos_token", writer.add_add_eos_token)):
        if "tokenizer.ggml." + key in meta:
            add(meta["tokenizer.ggml." + key])
    _finish(writer)


def pre_names() -> list[str]:
    """One name for each distinct pre-tokenizer onebit knows."""
    sys.path.insert(0, str(HERE.parents[2]))
    from onebit.text.pretokenizers import PRE_TOKENIZERS

    seen, names = set(), []
    for name in sorted(PRE_TOKENIZERS):
        pre = PRE_TOKENIZERS[name]
        if pre.byte_encode and pre not in seen:   # Gemma 4's kind needs its own vocabulary
            seen.add(pre)
            names.append(name)
    return names


def main(models: Path) -> None:
    import llama_cpp

    texts = corpus()
    golden = {"llama_cpp_python": llama_cpp.__version__, "corpus": texts, "vocabs": {},
              "pre": {"base": BASE_FOR_PRE, "names": {}}}
    for vocab in sorted(models.glob("ggml-vocab-*.gguf")):
        name = vocab.name[len("ggml-vocab-"):-len(".gguf")]
        own = own_strings(vocab)
        golden["vocabs"][name] = {"own": own, "corpus": ids_of(vocab, texts),
                                  "own_ids": ids_of(vocab, own)}
        print(name, file=sys.stderr)
    base = metadata(models / f"ggml-vocab-{BASE_FOR_PRE}.gguf")
    with tempfile.TemporaryDirectory() as tmp:
        for pre in pre_names():
            path = Path(tmp) / f"{pre}.gguf"
            write_with_pre(base, pre, path)
            golden["pre"]["names"][pre] = ids_of(path, texts)
            path.unlink()
            print("pre", pre, file=sys.stderr)
        golden["synthetic"] = {}
        for name, unk in (("rwkv", True), ("rwkv-no-unk", False)):
            path = Path(tmp) / f"{name}.gguf"
            write_rwkv(rwkv_vocab(unk=unk), path)
            golden["synthetic"][name] = ids_of(path, texts)
            path.unlink()
            print("synthetic", name, file=sys.stderr)
    with gzip.open(OUT, "wt", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        sys.path.insert(0, str(HERE.parents[2]))
        from onebit.corpus import models_dir

        main(models_dir())
