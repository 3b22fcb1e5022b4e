"""`StopText`: the text ends before the first stop string, nothing of a stop is ever sent,
and what is released, joined, is the text, however the pieces fall."""

from __future__ import annotations

import pytest

from onebit.serve.stops import StopText


def run(pieces, stops):
    cut = StopText(tuple(stops))
    sent = []
    for piece in pieces:
        sent.append(cut.push(piece))
        if cut.hit is not None:
            break
    else:
        sent.append(cut.finish())
    return cut, "".join(sent)


@pytest.mark.parametrize("pieces", [["Hello wor", "ld, and more"], ["Hello ", "w", "o", "r",
                                    "ld", ", and"], ["Hello world, and"]])
def test_stop_spanning_pieces_cuts_at_its_first_character(pieces):
    """A stop string split over pieces in any way ends the text just before it."""
    cut, sent = run(pieces, ["world"])
    assert cut.hit == "world"
    assert cut.text == sent == "Hello "


def test_held_back_prefix_is_released_when_it_turns_out_not_to_be_a_stop():
    """'wor' could start 'world': it is held until the next piece shows it does not."""
    cut = StopText(("world",))
    assert cut.push("Hello wor") == "Hello "
    assert cut.push("m is here") == "worm is here"
    assert cut.finish() == ""
    assert cut.text == "Hello worm is here"


def test_earliest_of_several_stops_wins_and_nothing_after_it_is_taken():
    """With several stops, the first to start ends the text; later pushes add nothing."""
    cut, sent = run(["a b c d"], ["c", "b"])
    assert cut.hit == "b" and sent == cut.text == "a "
    assert cut.push("more") == "" and cut.text == "a "


def test_no_stop_releases_everything_at_finish():
    """No stop string: every piece goes out at once, and a held tail at the end."""
    cut = StopText(("xyz",))
    assert cut.push("abx") == "ab"
    assert cut.finish() == "x"
    assert cut.text == "abx" and cut.hit is None
    assert StopText().push("anything") == "anything"
