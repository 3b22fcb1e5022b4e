"""Gemma 3's tokenizer against llama.cpp's, on the corpus: the ids llama.cpp itself gives on
Gemma 3 270M's GGUF (tests/text/data/gemma3_ids.json.gz, made by make_gemma3_ids.py through
llama-server's /tokenize; llama.cpp's corpus has no Gemma 3 vocabulary), for every corpus
string, with specials off and on. Skipped unless the model is cached (`onebit pull gemma3`,
which .ci/run does)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "data" / "gemma3_ids.json.gz"


@pytest.fixture(scope="module")
def golden() -> dict:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def gemma3_tokenizer(golden):
    """The tokenizer onebit builds from the GGUF's metadata (the loader's own), read once."""
    from onebit.gguf.reader import read_metadata
    from onebit.hub import known, skip_unless_cached
    from onebit.text.tokenizer import Tokenizer

    path = skip_unless_cached("gemma3")
    assert golden["sha256"] == known("gemma3").sha256, "the ids were made from another file"
    return Tokenizer.from_gguf_metadata(read_metadata(path)[2])


def test_golden_ids_are_for_this_corpus(golden):
    """The stored ids are for today's corpus strings and from the file `onebit pull gemma3`
    fetches (so a changed corpus or a different file cannot pass unnoticed)."""
    from onebit.hub import known

    lines = (GOLDEN.parent / "tokenizer_corpus.jsonl").read_text(encoding="utf-8").splitlines()
    assert golden["corpus"] == [json.loads(line) for line in lines]
    assert golden["sha256"] == known("gemma3").sha256
    assert len(golden["plain"]) == len(golden["special"]) == len(golden["corpus"])


@pytest.mark.parametrize("special", [False, True], ids=["plain", "special"])
def test_gemma3_tokenizer_gives_llama_cpps_ids(golden, gemma3_tokenizer, special):
    """onebit's tokenizer for Gemma 3's GGUF gives llama.cpp's ids for every corpus string:
    with add_special and parse_special both off, and both on (BOS, and `<start_of_turn>` and
    the like read as one token each)."""
    expected = golden["special" if special else "plain"]
    bad = [text for text, ids in zip(golden["corpus"], expected, strict=True)
           if gemma3_tokenizer.encode(text, add_special_tokens=special,
                                      parse_special=special) != ids]
    assert not bad, f"{len(bad)} of {len(expected)} strings differ; first: {bad[:3]}"
