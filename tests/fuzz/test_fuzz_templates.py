"""Generated hostile chat templates: loops nested over big sources, values doubled through
`~`, `+`, `*`, a namespace or a block, filters and methods with huge widths and counts,
recursion, composed at random. Each renders to a string or ends in one ChatTemplateError line,
within its CPU-time budget plus a margin and with tracemalloc's peak bounded: no input hangs,
fills memory or raises anything else."""

from __future__ import annotations

import time
import tracemalloc

from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from onebit.text import ChatTemplateError
from onebit.text.chat import MAX_RENDERED_CHARS, render
from onebit.text.template_budget import RenderBudget

# small bounds keep each example cheap; what is tested is that they hold, whatever the bound
BUDGET = RenderBudget(seconds=0.05, max_chars=1_000_000, max_items=100_000,
                      max_bytes=32 << 20)
MARGIN_S = 1.5
PEAK_MIB = 160
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]

NUMBERS = st.sampled_from([0, 1, 7, 1000, 10**5, 10**6, 10**7, 10**9, 10**18, -5])
SOURCES = st.sampled_from(["range(3)", "range(1000)", "range(10**5)", "range(10**9)",
                           "messages * 1000", "'x' * 100000", "ns.s", "ns.l", "[1, 2, 3]"])
GROW = st.sampled_from([
    "{% set ns.s = ns.s ~ ns.s %}",
    "{% set ns.s = ns.s + ns.s %}",
    "{% set ns.s = ns.s ~ ns.s ~ ns.s ~ i %}",
    "{% set ns.s = ns.s * 2 %}",
    "{% set ns.s = [ns.s, ns.s] | join %}",
    "{% set ns.s = ns.s.join([ns.s, ns.s]) %}",
    "{% set ns.s = '{0}{0}'.format(ns.s) %}",
    "{% set ns.s = '%s%s' % (ns.s, ns.s) %}",
    "{% set b %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = b %}",
    "{% set ns.s = m(ns.s) %}",
    "{% set ns.l = ns.l + ns.l %}",
    "{% set ns.l = ns.l + [ns.s ~ i] %}",
    "{% set ns.l = ns.l + [ns.s[1:]] %}",
    "{% set ns.n = ns.n * ns.n %}",
    "{% set ns.n = ns.n ** 3 %}",
    "{{ ns.s }}",
    "{{ ns.l }}",
])
WIDTH = st.builds(lambda form, n: form.replace("N", str(n)), st.sampled_from([
    "{{ 'ab' | center(N) }}", "{{ 'a'.ljust(N) }}", "{{ 'a'.rjust(N, 'x') }}",
    "{{ 'x'.zfill(N) }}", "{{ ('a\n' * 100) | indent(N) }}", "{{ '%Ns' | format(1) }}",
    "{{ '%*s' % (N, 'a') }}", "{{ '{:>N}'.format(1) }}", "{{ '{:>{w}}'.format(1, w=N) }}",
    "{{ [1] | batch(N, 'x') | list | length }}", "{{ [1] | slice(N) | list | length }}",
    "{{ range(N) | list | length }}", "{{ lipsum(N) | length }}",
    "{{ ('x' * 100).replace('x', 'y' * N) | length }}",
    "{{ ('ab ' * 100) | wordwrap(1, wrapstring='x' * N) | length }}",
    "{{ 'x' | truncate(N) }}", "{{ ns.s | truncate(N, end=ns.s) }}",
    "{{ ([ns.s] * 3) | tojson(indent=N) | length }}", "{{ ('\t' * 100).expandtabs(N) }}",
    "{{ ns.s | center(N) | length }}", "{{ dict.fromkeys(range(N)) | length }}",
    "{{ ['a'] | map('center', N) | join }}", "{{ ns.s | replace('', 'x' * N) | length }}",
    "{{ (ns.s * N) | length }}", "{{ ([ns.s] * N) | length }}", "{{ 2 ** N }}",
]), NUMBERS)
LEAVES = st.one_of(GROW, WIDTH, st.sampled_from([
    "x", "{{ ns.s | length }}", "{% if ns.s == ns.s ~ '' %}{% endif %}",
    "{{ f(0) }}", "{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}",
    "{{ (ns.l | string) | length }}", "{{ ns.s.split('') if false }}",
    "{{ (ns.s ~ ' ') * 3 | wordcount }}",
]))


def _loop(source, body):
    return f"{{% for i in {source} %}}{body}{{% endfor %}}"


BODIES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.builds(_loop, SOURCES, inner),
                            st.lists(inner, min_size=2, max_size=3).map("".join)),
    max_leaves=6)
PRELUDE = ("{% set ns = namespace(s='ab', l=[1], n=3) %}"
           "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}"
           "{% macro m(s) %}{{ s }}{{ s }}{% endmacro %}")


@fuzz_settings(quick=40)
@given(body=BODIES)
def test_generated_hostile_templates(tally, body):
    """A generated template renders to a string no longer than the output bound, or fails
    with one ChatTemplateError line; never another exception, never past its budget plus
    MARGIN_S of wall time, never more than PEAK_MIB MiB allocated."""
    template = PRELUDE + body
    tracemalloc.start()
    start = time.perf_counter()
    try:
        text = render(template, MESSAGES, budget=BUDGET)
        outcome = "right answer"
    except ChatTemplateError as error:
        assert "\n" not in str(error), error
        text, outcome = None, "clear error"
    finally:
        wall = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] >> 20
        tracemalloc.stop()
    assert wall < BUDGET.seconds + MARGIN_S, f"{wall:.2f} s: {template}"
    assert peak <= PEAK_MIB, f"{peak} MiB: {template}"
    if text is not None:
        assert isinstance(text, str) and len(text) <= MAX_RENDERED_CHARS
    tally("text: generated hostile template", outcome)
