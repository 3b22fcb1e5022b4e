"""The plugin's part for served engines: `--onebit-url`, `--onebit-plain-url`,
`--onebit-sampled`, `--onebit-delta` and `--onebit-field` (wired into
pytest_onebit/plugin.py), read by the pytest entry `pytest_onebit.peers.served`, which builds
the peer from them. Imports only pytest."""

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
