"""The served checks for a server's own CI, for one command line:

    pytest --pyargs pytest_onebit.peers.served --onebit-url URL [--onebit-plain-url URL]

holds the OpenAI-compatible server at URL (speculation on) to its own plain decode (a second
server, or the same one with `"speculative": false`) on the checks `onebit peer openai` runs
(pytest_onebit/peers/openai_peer.py), one test per check and endpoint: a failed check fails its
test with the check's detail, a check that does not apply skips with its reason. S1 is
opt-in (`--onebit-sampled`, `--onebit-delta`); `--onebit-field KEY=VALUE` adds a field to every
request. The options are the plugin's (pytest_onebit/served_plugin.py; docs/peers.md,
"A pytest entry for servers").
"""

from __future__ import annotations

import pytest

from pytest_onebit.peers.openai_peer import CHECKS, ENDPOINTS
from pytest_onebit.peers.protocol import FAILED, NOT_APPLICABLE


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per (endpoint, check); S1 only where asked for, as `onebit peer openai`."""
    if "served_check" not in metafunc.fixturenames:
        return
    if not metafunc.config.getoption("onebit_url", None):  # one usage error, not a test each
        raise pytest.UsageError("pytest_onebit.peers.served needs --onebit-url URL (the "
                                "speculative server to hold)")
    sampled = metafunc.config.getoption("onebit_sampled", False)
    pairs = [(arm, check) for arm in ENDPOINTS for check in CHECKS
             if sampled or check != "S1-distribution"]
    metafunc.parametrize(("served_endpoint", "served_check"), pairs,
                         ids=[f"{arm}-{check}" for arm, check in pairs])


@pytest.fixture(scope="session")
def served_arms(request: pytest.FixtureRequest) -> dict:
    """endpoint -> its `EndpointArm`, one per session (its answers are shared by the checks
    that ask the same request), after the server was reached; a server that cannot be reached
    fails every test, naming the reason."""
    from pytest_onebit.peers.openai_peer import EndpointArm

    peer = served_peer(request.config)
    reason = peer.unavailable()
    if reason is not None:
        pytest.fail(f"{reason} (--onebit-url {request.config.getoption('onebit_url')})",
                    pytrace=False)
    return {name: EndpointArm(peer, name) for name in ENDPOINTS}


def test_served_check(served_arms: dict, served_endpoint: str, served_check: str) -> None:
    """The served check named in the test id, on that endpoint, against plain decode: passes
    when the check passes, fails with its detail, skips with the reason it does not apply."""
    outcome = served_arms[served_endpoint].run_check(served_check)
    if outcome.status == FAILED:
        pytest.fail(f"{served_check} on {served_endpoint}: {outcome.detail}", pytrace=False)
    if outcome.status == NOT_APPLICABLE:
        pytest.skip(f"{served_check} on {served_endpoint}: {outcome.detail}")


def served_peer(config: pytest.Config):
    """The `OpenAIPeer` the options name, reached once; a usage error without --onebit-url
    or with a bad value, a failure (every test's) when the server cannot be reached."""
    url = config.getoption("onebit_url", None)
    if not url:
        raise pytest.UsageError("pytest_onebit.peers.served needs --onebit-url URL (the "
                                "speculative server to hold)")
    from pytest_onebit.peers.openai_client import parse_fields
    from pytest_onebit.peers.openai_peer import OpenAIPeer

    try:
        peer = OpenAIPeer(url, config.getoption("onebit_plain_url", None),
                          sampled=config.getoption("onebit_sampled", False),
                          delta=config.getoption("onebit_delta", None),
                          fields=parse_fields(config.getoption("onebit_field", []) or []))
    except ValueError as error:
        raise pytest.UsageError(f"pytest_onebit.peers.served: {error}") from None
    return peer
