"""`pytest --pyargs pytest_onebit.peers.served --onebit-url URL [--onebit-plain-url URL]`: the
served checks as one pytest test per check and endpoint, run by pytester against onebit serve
in-process on the fabricated ServedToy (clean, and with a planted fault that must fail), and
the usage errors an engine's CI gets for a missing option."""

from __future__ import annotations

import pytest

# imported before any pytester run: an in-process run drops the modules it imported, and
# numpy cannot be loaded twice in one process
import pytest_onebit.peers.served  # noqa: F401

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

ENTRY = ("--pyargs", "pytest_onebit.peers.served", "-p", "no:cacheprovider")


def serving(engine):
    from onebit.serve import create_app
    from onebit.serve.server import ServerThread

    return ServerThread(create_app(engine))


@pytest.fixture(scope="module")
def clean_url():
    """onebit serve on ServedToy drafting by prompt lookup (its plain decode is the same URL
    with `speculative: false`)."""
    from onebit.serve import Engine
    from pytest_onebit.serve.toy import ServedToy

    with serving(Engine(ServedToy(), head="ngram")) as server:
        yield server.url


@pytest.fixture(scope="module")
def planted_urls():
    """(speculative, plain): the toy with the twin drafter (its second choice drafted, so
    every draft is wrong) decoded by a loop that accepts one draft past the first mismatch,
    and a plain server of its own (a head object drafts even a `speculative: false`
    request)."""
    from pytest_onebit.peers.openai_plants import loop_copy
    from pytest_onebit.peers.sampled_plants import DrafterEngine, TwinDrafter, plain_engine
    from pytest_onebit.serve.toy import ServedToy

    run = loop_copy("accept-one-more", "count = self.emit_and_commit(batch[: take + 1])",
                    "count = self.emit_and_commit(batch[: take + 2])")
    spec = DrafterEngine(ServedToy(), TwinDrafter("swapped"), "accept-one-more", run=run)
    with serving(spec) as planted, serving(plain_engine()) as plain:
        yield planted.url, plain.url


def test_without_a_url_it_is_one_usage_error(pytester):
    """No --onebit-url: one usage error naming the option, not a test per check, and the run
    does not pass (an engine's CI that lost its URL must not go green)."""
    result = pytester.runpytest(*ENTRY)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*pytest_onebit.peers.served needs --onebit-url URL*"])


def test_a_clean_server_passes_the_checks_asked(pytester, clean_url):
    """On a clean server, I1-text and I9-budget pass on both endpoints: four tests, one per
    check and endpoint, each named by both."""
    result = pytester.runpytest(*ENTRY, "--onebit-url", clean_url, "-k",
                                "I1-text or I9-budget", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_served_check?completions-I1-text? PASSED*",
                                 "*test_served_check?chat-I9-budget? PASSED*"])


def test_a_planted_server_fails_with_the_checks_detail(pytester, planted_urls):
    """A server whose loop accepts one draft past the first mismatch fails I1-text on both
    endpoints (--onebit-plain-url the plain server), each failure the check's own detail
    (where the ids first differ), and pytest exits 1."""
    spec, plain = planted_urls
    result = pytester.runpytest(*ENTRY, "--onebit-url", spec, "--onebit-plain-url", plain,
                                "-k", "I1-text")
    result.assert_outcomes(failed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*I1-text on completions: prompt 0: token *: speculative *"])


@pytest.mark.slow  # every check on both endpoints through pytest: about 8 s on two busy cores
def test_every_check_is_one_test_and_a_clean_server_passes_them_all(pytester, clean_url):
    """The whole entry on a clean server: 18 tests (9 checks x 2 endpoints, S1 left out as
    `onebit peer openai` leaves it without --sampled), all passing but I10-eos, which skips
    with its reason (completions has no turn to end; the toy's chat answers do not end theirs
    within 48 tokens)."""
    result = pytester.runpytest(*ENTRY, "--onebit-url", clean_url, "-rs")
    result.assert_outcomes(passed=16, skipped=2)
    result.stdout.fnmatch_lines(["*I10-eos on completions: chat only*"])
