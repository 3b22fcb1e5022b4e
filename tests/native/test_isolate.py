"""in_child: a function run in a forked child comes back as its value, or as one ChildFailure
line saying what happened to the child; nothing the child changes reaches the parent."""

from __future__ import annotations

import os

import pytest

from pytest_onebit.native.isolate import ChildFailure, in_child


def test_the_value_comes_back_and_the_parent_is_untouched():
    """The child's return value is pickled back; its changes to shared objects are not."""
    seen = [1]

    def work():
        seen.append(2)
        return {"pid": os.getpid(), "seen": list(seen)}

    answer = in_child(work, timeout=30)
    assert answer["seen"] == [1, 2] and answer["pid"] != os.getpid()
    assert seen == [1]


def test_an_exception_in_the_child_is_one_line():
    """An exception becomes ChildFailure naming its type and message."""
    def boom():
        raise KeyError("nope")

    with pytest.raises(ChildFailure, match=r"^the library: KeyError: 'nope'$"):
        in_child(boom, timeout=30)


def test_a_child_that_exits_without_answering_is_reported():
    """os._exit(3) before answering is 'exited with status 3 before answering'."""
    with pytest.raises(ChildFailure, match="exited with status 3 before answering"):
        in_child(lambda: os._exit(3), timeout=30, what="probe")


def test_a_bad_timeout_is_refused():
    """A timeout of zero or less is a ValueError naming it, before any fork."""
    with pytest.raises(ValueError, match="timeout must be > 0 seconds, got 0"):
        in_child(lambda: 1, timeout=0)
