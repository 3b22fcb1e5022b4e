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
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


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
