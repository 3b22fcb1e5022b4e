"""The streaming decoder never emits half a character, and its pieces join to `decode()`."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Text that splits across tokens mid-character: emoji (with ZWJ and skin tones), CJK, accents,
# RTL, and plain ASCII and whitespace around them. Control characters and unassigned code
# points are left out: SmolLM2's vocabulary lacks a few of their bytes (and the lead bytes of
# planes 4 and up), so the tokenizer drops them, as transformers' does.
_PIECES = st.sampled_from([
    "👨\u200d👩\u200d👧\u200d👦", "👍🏽", "🏳️\u200d🌈", "日本語", "漢字", "한국어", "é", "ñ", "ß",
    "مرحبا", "שלום", " ", "\n", "\t", "  ", "a", "Hello", "123", "😀", "🤖", "∑", "\u0301",
])
_CHARS = st.characters(exclude_categories=("Cc", "Cs", "Cn"))
TEXTS = st.lists(st.one_of(_PIECES, st.text(_CHARS, max_size=4)), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_stream_emits_whole_characters(smollm2_tokenizer, text):
    """Token by token, every emitted piece is text that is also a prefix of the full decode (so
    no piece ends in a replacement for a character that a later token completes), and the
    pieces joined equal `decode(ids)`, which equals the input."""
    tok = smollm2_tokenizer
    ids = tok.encode(text, add_special_tokens=False)
    full = tok.decode(ids)
    stream = tok.stream()
    emitted = ""
    for token_id in ids:
        emitted += stream.push(token_id)
        assert full.startswith(emitted), (text, emitted)
    emitted += stream.flush()
    assert emitted == full == text


def test_split_emoji_is_held_back(smollm2_tokenizer):
    """An emoji the tokenizer cuts into several byte tokens comes out whole on the token that
    completes it, and nothing before; an unfinished one flushes as U+FFFD like decode()."""
    tok = smollm2_tokenizer
    ids = tok.encode("🤖", add_special_tokens=False)
    assert len(ids) > 1
    stream = tok.stream()
    pieces = [stream.push(i) for i in ids]
    assert pieces[:-1] == [""] * (len(ids) - 1) and pieces[-1] == "🤖"
    stream = tok.stream()
    assert stream.push(ids[0]) == "" and stream.flush() == "\ufffd" == tok.decode(ids[:1])


def test_stream_spm_strips_the_prefix_space(spm_metadata):
    """A SentencePiece stream drops the space the tokenizer put before the text, as decode()
    does, and skips BOS when asked."""
    from onebit.text import Tokenizer

    tok = Tokenizer.from_gguf_metadata(spm_metadata())
    ids = tok.encode("hello abc é")
    stream = tok.stream(skip_special_tokens=True)
    text = "".join(stream.push(i) for i in ids) + stream.flush()
    assert text == tok.decode(ids, skip_special_tokens=True) == "hello abc é"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS)
def test_stream_spm_property(spm_metadata, text):
    """The same property on SentencePiece, where most characters here fall back to their
    UTF-8 byte pieces one byte at a time: every piece is a prefix of decode, and the pieces
    joined equal decode(ids) (BOS skipped)."""
    from onebit.text import Tokenizer

    tok = Tokenizer.from_gguf_metadata(spm_metadata())
    ids = tok.encode(text)
    full = tok.decode(ids, skip_special_tokens=True)
    stream = tok.stream(skip_special_tokens=True)
    emitted = ""
    for token_id in ids:
        emitted += stream.push(token_id)
        assert full.startswith(emitted), (text, emitted)
    assert emitted + stream.flush() == full
