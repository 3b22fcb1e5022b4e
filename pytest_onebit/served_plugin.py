"""The plugin's part for served engines: `--onebit-url`, `--onebit-plain-url`,
`--onebit-sampled`, `--onebit-delta` and `--onebit-field` (wired into
pytest_onebit/plugin.py), read by the pytest entry `pytest_onebit.peers.served`. Imports only
pytest: the peer is imported by the entry's fixture, when a test asks for it."""

from __future__ import annotations

import pytest


def add_served_options(group: pytest.OptionGroup) -> None:
    group.addoption("--onebit-url", default=None, metavar="URL",
                    help="the OpenAI-compatible server (with speculation) that "
                    "`pytest --pyargs pytest_onebit.peers.served` holds to its plain decode "
                    "(docs/peers.md)")
    group.addoption("--onebit-plain-url", default=None, metavar="URL",
                    help="the same model served without speculation (default: --onebit-url "
                    "with `\"speculative\": false` in each request, onebit serve's switch)")
    group.addoption("--onebit-sampled", action="store_true",
                    help="run S1-distribution too (sampled answers: about 4200 requests an "
                    "endpoint at its default power)")
    group.addoption("--onebit-delta", default=None, type=float, metavar="TV",
                    help="the total-variation distance S1 detects with 99 %% power (default: "
                    "0.05 one-sample, 0.5 two-sample)")
    group.addoption("--onebit-field", action="append", default=[], metavar="KEY=VALUE",
                    help="a field sent in every request (JSON value, else a string); "
                    "repeatable, as `onebit peer openai --field`")


def served_peer(config: pytest.Config):
    """The `OpenAIPeer` the options name, reached once; a usage error without --onebit-url
    or with a bad value, a failure (every test's) when the server cannot be reached."""
    url = config.getoption("onebit_url", None)
    if not url:
        raise pytest.UsageError("pytest_onebit.peers.served needs --onebit-url URL (the "
                                "speculative server to hold)")
    from onebit.commands.peer import parse_fields
    from pytest_onebit.peers.openai_peer import OpenAIPeer

    try:
        peer = OpenAIPeer(url, config.getoption("onebit_plain_url", None),
                          sampled=config.getoption("onebit_sampled", False),
                          delta=config.getoption("onebit_delta", None),
                          fields=parse_fields(config.getoption("onebit_field", []) or []))
    except ValueError as error:
        raise pytest.UsageError(f"pytest_onebit.peers.served: {error}") from None
    return peer
