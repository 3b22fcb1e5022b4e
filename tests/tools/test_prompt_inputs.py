"""Prompt files read as documented: `#` comments anywhere on a line, ASCII digits only."""

from __future__ import annotations

import re

import pytest

from onebit.tools.inputs import ToolInputError, read_prompt_ids


def test_trailing_comment_after_the_ids(tmp_path):
    """A `# comment` after the ids of a line is a comment, as the README says, not a bad id."""
    path = tmp_path / "p.txt"
    path.write_text("1 2 3  # the greeting\n4,5# tight\n# whole line\n")
    assert read_prompt_ids(path, 8) == [[1, 2, 3], [4, 5]]


@pytest.mark.parametrize("word", ["１２", "٣", "²", "1_000", "+3", "0x10", "1e3"])
def test_only_ascii_digits_are_token_ids(tmp_path, word):
    """Full-width, Arabic-Indic and superscript digits, underscores, signs, hex and
    exponents are refused naming the file, the line and the word (int() would take some)."""
    path = tmp_path / "p.txt"
    path.write_text(f"1 2\n3 {word}\n", encoding="utf-8")
    with pytest.raises(ToolInputError, match=re.escape(f"p.txt:2: '{word}' is not a token id")):
        read_prompt_ids(path)


def test_a_prompt_file_that_is_not_utf8(tmp_path):
    """Bytes that are not UTF-8 are one error naming the file."""
    path = tmp_path / "p.txt"
    path.write_bytes(b"1 2 \xff\n")
    with pytest.raises(ToolInputError, match="p.txt: cannot read the prompt file"):
        read_prompt_ids(path)
