"""`onebit serve`'s options, refused by name before any model loads."""

from __future__ import annotations

import pytest

from onebit.cli import main


@pytest.mark.parametrize("argv,named", [
    (["--stream-interval", "-1"], "--stream-interval must be >= 0, got -1"),
    (["--stream-interval", "soon"], "--stream-interval wants an integer, got 'soon'"),
    (["--port", "70000"], "--port must be in [1, 65535], got 70000"),
])
def test_bad_options_are_refused_by_name(capsys, argv, named):
    """A bad value is exit 2 with the flag and the value named, before anything is served."""
    with pytest.raises(SystemExit) as stopped:
        main(["serve", *argv])
    assert stopped.value.code == 2
    assert named in capsys.readouterr().err


def test_the_stream_interval_defaults_to_the_servers_own():
    """`--stream-interval` defaults to `onebit.serve.stream.STREAM_INTERVAL`, in ms."""
    import argparse

    from onebit.commands import serve
    from onebit.serve.stream import STREAM_INTERVAL

    parser = serve.add_parser(argparse.ArgumentParser().add_subparsers())
    assert parser.parse_args([]).stream_interval == round(STREAM_INTERVAL * 1000) == 20
