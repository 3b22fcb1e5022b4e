"""`onebit serve --head suffix`: the served contract V1..V7 with suffix drafts, one request at a
time and on three slots (a crowd among them, four of its clients leaving mid-answer); the
cache of recent answers fed with finished answers only, and its size on /metrics; each slot
drafting from its own request's text, never another's."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from onebit.heads import registry  # noqa: E402
from onebit.heads.suffix import SuffixCache  # noqa: E402
from pytest_onebit.serve.scenarios import ServedScenario, standard_served_scenarios  # noqa: E402
from pytest_onebit.serve.suite import ServedContract  # noqa: E402


def _suffix_scenarios() -> list[ServedScenario]:
    """The standard one-at-a-time and three-slot scenarios' requests under `--head suffix`."""
    chosen = {s.id: s for s in standard_served_scenarios()}
    one, three, crowd = chosen["one-at-a-time"], chosen["parallel-3"], chosen["crowd-parallel-3"]
    return [ServedScenario("one-at-a-time-suffix", one.asks, head="suffix"),
            ServedScenario("parallel-3-suffix", three.asks, parallel=3, head="suffix"),
            ServedScenario("crowd-parallel-3-suffix", crowd.asks, parallel=3, concurrent=True,
                           pass_delay=crowd.pass_delay, head="suffix")]


class TestSuffixServed(ServedContract):
    """onebit serve with every request drafting from its own suffix tree and the server's
    cache of recent answers: each answer is the library's, tokens, stream, stops, logprobs,
    knobs and n, whatever the drafts (which change as the cache fills)."""

    scenarios = _suffix_scenarios()


@pytest.fixture
def fresh_cache(monkeypatch):
    """The process's suffix cache, emptied for one test (other tests' answers stay out)."""
    cache = SuffixCache()
    monkeypatch.setattr(registry, "_SUFFIX_CACHE", cache)
    return cache


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("parallel", [None, 2])
def test_finished_answers_feed_the_cache_and_metrics_show_its_size(fresh_cache, parallel):
    """A finished answer's tokens (and only they: no draft that was not committed) go into
    the cache once per answer, and /metrics exports the cache's answers, tokens and nodes."""
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.serve.toy import ServedToy

    model = ServedToy(parallel or 1)
    with ServerThread(create_app(Engine(model, head="suffix", parallel=parallel))) as server:
        answers = [_post(f"{server.url}/v1/completions",
                         {"prompt": prompt, "max_tokens": 24, "temperature": 0})
                   for prompt in ("tell a story", "hello there")]
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
            metrics = response.read().decode()
    tokens = sum(a["usage"]["completion_tokens"] for a in answers)
    size = fresh_cache.size()
    assert size["answers"] == 2 and size["tokens"] == tokens
    assert f"onebit_suffix_cache_answers {float(size['answers'])}" in metrics
    assert f"onebit_suffix_cache_tokens {float(tokens)}" in metrics
    assert f"onebit_suffix_cache_nodes {float(size['nodes'])}" in metrics


def test_generate_keeps_its_answer_for_the_next_request(fresh_cache):
    """`onebit.generate(head="suffix")` adds its committed tokens to the cache (what `onebit
    chat` keeps across turns); another head adds nothing."""
    import onebit
    from pytest_onebit.serve.toy import ServedToy

    tiny_model = ServedToy()

    first = onebit.generate(tiny_model, "abc abc abc", max_tokens=12, head="suffix")
    assert fresh_cache.size()["tokens"] == len(first.result.tokens)
    onebit.generate(tiny_model, "abc abc abc", max_tokens=12, head="ngram")
    assert fresh_cache.size()["answers"] == 1


def test_SX1_each_slot_drafts_from_its_own_request(fresh_cache):
    """Served on three slots at once, each request's head holds exactly that request's text
    (its prompt's ids, then the tokens it answered) and nothing of a neighbour's: each slot's
    factory makes a head of its own, with a tree of its own, so no request's text reaches
    another's drafts except through the bounded cache of finished answers."""
    from onebit.heads import suffix as suffix_module
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.serve.toy import ServedToy

    made: list = []
    lock = threading.Lock()
    real = suffix_module.SuffixHead.__init__

    def recording(self, *args, **kwargs):
        real(self, *args, **kwargs)
        with lock:
            made.append(self)

    model = ServedToy(3)
    prompts = ["aaaa bbbb aaaa bbbb aaaa", "xyxyxyxyxyxyxy", "the cat the cat the cat"]
    answers: dict[str, dict] = {}

    def ask(prompt: str) -> None:
        answers[prompt] = _post(f"{server.url}/v1/completions",
                                {"prompt": prompt, "max_tokens": 40, "temperature": 0})

    try:
        suffix_module.SuffixHead.__init__ = recording
        with ServerThread(create_app(Engine(model, head="suffix", parallel=3))) as server:
            threads = [threading.Thread(target=ask, args=(p,)) for p in prompts]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        suffix_module.SuffixHead.__init__ = real
    wanted = sorted(tuple(model.tokenizer.encode(p, add_special_tokens=True))
                    + tuple(answers[p]["choices"][0]["token_ids"]) for p in prompts)
    held = sorted(tuple(h.text) for h in made if h.text)
    assert len(held) == len(prompts)
    for have, want in zip(held, wanted, strict=True):  # the loop may commit a stop id first
        assert have[:len(want)] == want and len(have) - len(want) <= 1
